"""The book's machinery: seeding, devices, progress bars, chapter parameters, the results cache with
provenance, reading chapters as notebooks and the nbval plugin. Imports nothing else of `helpers`."""
