"""What a framework calls by name, for `scripts/dead_code.py`: a name here is never reported dead. Each with its
caller; nothing a page, notebook or test calls belongs here (the check reads those)."""

CALLED_BY_NAME = {
    "pytest_configure": "pytest calls the hooks of helpers/machinery/nbplugin.py, the plugin `make test` loads",
    "pytest_collection_modifyitems": "a pytest hook (helpers/machinery/nbplugin.py)",
    "pytest_collect_file": "a pytest hook (helpers/machinery/nbplugin.py)",
    "_offline_env": "an autouse pytest fixture (helpers/machinery/nbplugin.py)",
    "extra_repr": "torch.nn.Module's repr calls it (core.softdecay.SoftDecay)",
    "log_message": "http.server calls it on every request (scripts/check_pages.py's quiet server)",
}
