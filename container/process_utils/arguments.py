"""Command lines whose errors say what is wrong in their first line."""

from __future__ import annotations

import argparse
from typing import NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, but a bad command line prints the error first, in one line, and
    where the arguments are described, instead of the whole usage block with the error last;
    exit code 2, as argparse's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n({self.prog} --help describes them all)\n")
