"""The user's code: the handler API it is written against (handler_api), what handlers must
return (contract), and how inference.py is imported (loading). Standard library only: the
service's workers and the handler processes (environments/) both use it."""
