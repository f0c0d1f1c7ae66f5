"""The simulator tier: bundled scenarios, bad scenario files, properties, the simulate command."""
