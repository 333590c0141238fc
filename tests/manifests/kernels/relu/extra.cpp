// Placeholder kernel source for the manifest tests (never compiled).
