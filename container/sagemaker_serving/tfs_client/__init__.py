"""tfs_client."""
