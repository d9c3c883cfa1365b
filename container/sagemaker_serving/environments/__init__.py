"""User code environments: what `code/inference.py` imports from, and which process runs it.

- `visible`: the container's packages that user code sees (a documented set), and a folder
  of links to exactly those, which every user environment layers on.
- `requirements`: `code/requirements.txt` read and checked before pip sees it (requirement
  lines and a short list of options; files and paths inside code/ only).
- `build`: a `code/` directory made ready: `requirements.txt` installed into a virtual
  environment of its own over that folder (pip installs only what is missing or pinned
  differently), and the choice of process: the service's own workers when the user's packages
  and the service's can share an interpreter, else a pool of handler processes running the
  environment's interpreter (one copy of every distribution per process, always).
- `host` (run under the user's interpreter, standard library only), `protocol` (its frames),
  `pool` (start, wait for, stop a pool) and `remote` (the service's side of the channel).
"""
