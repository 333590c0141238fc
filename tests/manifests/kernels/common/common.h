// Placeholder header for the manifest tests.
