"""`tfs-model-server`: tensorflow_model_server's flags and entry point."""
