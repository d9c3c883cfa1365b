"""The model server itself: errors, loaded versions (servable, manager), the data plane that
runs requests on them, warmup, config files and the server that wires it all."""
