"""SageMaker hosting layer: settings, serve supervisor, nginx front door, Python service."""
