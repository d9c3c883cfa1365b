"""Builders of the example and test SavedModels (TF Serving's classic test models and more)."""
