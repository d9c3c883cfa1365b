"""multimodel."""
