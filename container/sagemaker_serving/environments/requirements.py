"""code/requirements.txt read and checked before pip sees it.

pip takes a requirements file as a command line: it reads any file a `-r` or `-c` names, builds
and runs the `setup.py` of any path, follows any link. So the file is read here, once, and
only what is allowed goes to pip, in a file of our own (`Requirements.write`):

- requirement specifiers (PEP 508: `name[extras] specifier ; marker`, a direct reference to an
  http(s) URL or to a file inside code/), paths of archives and project folders inside code/,
  each with `--hash` options;
- the options in `ALLOWED`: `-r`/`-c` only for files inside code/ (read and checked here, in
  the file pip gets), `-f` only for a folder inside code/ or an http(s) URL, index options only
  to http(s) URLs;
- with code/wheelhouse, no index, no link and no URL at all: the wheelhouse is the only source.

Anything else is refused with the file and line that says it and what is not allowed, never with
the content of a file outside code/ (none is ever opened). Paths are resolved through links:
inside code/ means inside it once every link is followed. `${VARIABLE}`s are refused (pip would
put the service's environment into them).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement

from sagemaker_serving.environments.visible import canonical
from sagemaker_serving.user_code.loading import UserCodeError

REQUIREMENTS_FILE = "requirements.txt"
WHEELHOUSE_DIR = "wheelhouse"
MAX_FILE_BYTES = 1 << 20  # one requirements file; more is no list of packages
MAX_FILES = 32  # requirements.txt and the files its -r and -c name, in all
# pip's options that are allowed, each spelling -> (its long name, takes a value)
ALLOWED = {
    "-r": ("--requirement", True),
    "--requirement": ("--requirement", True),
    "-c": ("--constraint", True),
    "--constraint": ("--constraint", True),
    "-i": ("--index-url", True),
    "--index-url": ("--index-url", True),
    "--extra-index-url": ("--extra-index-url", True),
    "--no-index": ("--no-index", False),
    "-f": ("--find-links", True),
    "--find-links": ("--find-links", True),
    "--pre": ("--pre", False),
    "--prefer-binary": ("--prefer-binary", False),
    "--only-binary": ("--only-binary", True),
    "--no-binary": ("--no-binary", True),
    "--require-hashes": ("--require-hashes", False),
}
ALLOWED_TEXT = "-r, -c, -i/--index-url, --extra-index-url, --no-index, -f/--find-links, --pre, "
ALLOWED_TEXT += "--prefer-binary, --only-binary, --no-binary, --require-hashes, --hash"
INDEX_OPTIONS = ("--index-url", "--extra-index-url", "--find-links")
ARCHIVES = (
    *(".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz"),
    *(".tlz", ".tar.lz", ".tar.lzma"),
)

_COMMENT = re.compile(r"(^|\s+)#.*$")
_VARIABLE = re.compile(r"\$\{[A-Za-z0-9_]+\}")
_EXTRAS = re.compile(r"^(.+?)(\[[^\]]+\])$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_OPTION_NAME = re.compile(r"--?[A-Za-z0-9][A-Za-z0-9-]{0,40}")
_HASH = re.compile(r"(sha256|sha384|sha512):[0-9a-fA-F]{32,128}")
_FORMATS = re.compile(r"[A-Za-z0-9._:,-]+")  # --only-binary / --no-binary values
_SAFE_PATH = re.compile(r"[\w./+=,~-]+")  # a path pip reads on a requirement line as it is


class RequirementsError(UserCodeError):
    """requirements.txt asks for something that is not allowed: the file, line and why."""


@dataclass(frozen=True)
class Requirements:
    """What pip gets: lines checked and rewritten (paths absolute or relative to code/,
    nested files' lines in place), the distributions they name, the files they use."""

    lines: tuple[str, ...]  # options and requirements, for pip's -r
    constraints: tuple[str, ...]  # from -c files
    names: tuple[str, ...]  # canonical names of the distributions asked for
    local: tuple[Path, ...]  # files and folders inside code/ that are installed or searched

    def write(self, directory: Path) -> Path:
        """The requirements file for pip (and its constraints file) in `directory`."""
        lines = list(self.lines)
        if self.constraints:
            constraints = directory / "constraints.txt"
            constraints.write_text("".join(f"{line}\n" for line in self.constraints))
            lines.insert(0, f"--constraint {shlex.quote(str(constraints))}")
        path = directory / REQUIREMENTS_FILE
        path.write_text("".join(f"{line}\n" for line in lines))
        return path


def read(code_dir: Path) -> Requirements:
    """code/requirements.txt checked (RequirementsError, a UserCodeError, says what is not
    allowed, where); with code/wheelhouse, no index, link or URL may be named."""
    wheelhouse = (code_dir / WHEELHOUSE_DIR).is_dir()
    reader = _Reader(code_dir.resolve(), wheelhouse)
    if wheelhouse:
        reader.inside(code_dir / WHEELHOUSE_DIR, f"code/{WHEELHOUSE_DIR} is")
    reader.read_file(code_dir / REQUIREMENTS_FILE, None, False)
    return Requirements(
        tuple(reader.lines),
        tuple(reader.constraints),
        tuple(dict.fromkeys(reader.names)),
        tuple(dict.fromkeys(reader.local)),
    )


@dataclass
class _Reader:
    root: Path  # code/, resolved
    wheelhouse: bool
    lines: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    local: list[Path] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)

    # ----- files -------------------------------------------------------------------------------

    def read_file(self, path: Path, where: str | None, constraint: bool, option: str = "") -> None:
        """Check every line of `path` (named at `where`, "code/x line 3", by `option`; None:
        it is code/requirements.txt)."""
        named = f"{where}: {option} names a file" if where else f"code/{REQUIREMENTS_FILE}"
        real = self.inside(path, named if where else f"{named} links to a file")
        if real in self.seen:
            raise RequirementsError(f"{named} already read (each file is read once)")
        if len(self.seen) >= MAX_FILES:
            raise RequirementsError(f"{named} past the most files read ({MAX_FILES})")
        self.seen.add(real)
        text = _read_text(real, f"{named} that" if where else named)
        label = real.relative_to(self.root).as_posix()
        for number, line in _logical_lines(text):
            self.line(line, f"code/{label} line {number}", real.parent, constraint)

    def inside(self, path: Path, named: str) -> Path:
        """`path` resolved through every link; refused unless it is inside code/ and there,
        and, for a folder, everything in it too. `named`: what names it, for the error
        ("code/x line 3: -r names a file")."""
        real = Path(os.path.realpath(path))
        if not self.within(real):
            raise RequirementsError(
                f"{named} outside code/ (only files and folders inside it may be used)"
            )
        if not real.exists():
            raise RequirementsError(f"{named} that does not exist inside code/")
        for folder, dirs, files in os.walk(real) if real.is_dir() else ():
            for name in (*dirs, *files):
                if not self.within(Path(os.path.realpath(os.path.join(folder, name)))):
                    raise RequirementsError(
                        f"{named} holding a link outside code/ (only files and folders inside "
                        "it may be used)"
                    )
        return real

    def within(self, real: Path) -> bool:
        return real == self.root or self.root in real.parents

    # ----- lines -------------------------------------------------------------------------------

    def line(self, line: str, where: str, directory: Path, constraint: bool) -> None:
        if _VARIABLE.search(line):
            raise RequirementsError(
                f"{where}: ${{...}} is not allowed (environment variables are not expanded: "
                "set PIP_INDEX_URL or PIP_EXTRA_INDEX_URL in the endpoint's environment)"
            )
        if line.startswith("-"):
            self.options(_split(line, where), where, directory, constraint)
            return
        requirement, options = _break(line)
        hashes = self.hashes(_split(options, where), where)
        rewritten, name = self.requirement(requirement, where)
        if constraint:
            self.constraints.append(rewritten + hashes)
        else:
            self.lines.append(rewritten + hashes)
            self.names += [name] if name else []

    def options(self, tokens: list[str], where: str, directory: Path, constraint: bool) -> None:
        index = 0
        while index < len(tokens):
            name, value, index = _option(tokens, index, where)
            if name in ("--requirement", "--constraint"):
                assert value is not None
                if _URL.match(value):
                    raise RequirementsError(f"{where}: {name} names a URL (only files in code/)")
                nested = constraint or name == "--constraint"
                self.read_file(directory / value, where, nested, name)
            elif name in INDEX_OPTIONS:
                assert value is not None
                self.lines.append(self.source(name, value, where, directory))
            elif value is not None:
                if not _FORMATS.fullmatch(value):
                    raise RequirementsError(f"{where}: {name} takes :all:, :none: or names")
                self.lines.append(f"{name} {value}")
            else:
                self.lines.append(name)

    def source(self, name: str, value: str, where: str, directory: Path) -> str:
        """An index or find-links option, rewritten (a folder as its absolute path)."""
        if self.wheelhouse:
            raise RequirementsError(
                f"{where}: {name} is not allowed with code/wheelhouse (its wheels are the only "
                "source: no index and no other link)"
            )
        if _URL.match(value):
            return f"{name} {shlex.quote(_http_url(value, where, name))}"
        if name != "--find-links":
            raise RequirementsError(f"{where}: {name} takes an http(s) URL")
        real = self.inside(directory / value, f"{where}: {name} names a path")
        self.local.append(real)
        return f"{name} {shlex.quote(str(real))}"

    def hashes(self, tokens: list[str], where: str) -> str:
        """The --hash options of a requirement line, checked and written back."""
        out = ""
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if token.startswith("--hash="):
                value, index = token[len("--hash=") :], index + 1
            elif token == "--hash" and index + 1 < len(tokens):
                value, index = tokens[index + 1], index + 2
            else:
                raise RequirementsError(
                    f"{where}: {_named(token)} is not allowed after a requirement (only --hash)"
                )
            if not _HASH.fullmatch(value):
                raise RequirementsError(f"{where}: --hash takes sha256:, sha384: or sha512:<hex>")
            out += f" --hash={value}"
        return out

    def requirement(self, text: str, where: str) -> tuple[str, str]:
        """A requirement rewritten for pip (a name (PEP 508), a URL or a path inside code/),
        and the distribution it names ("" when a path or URL alone does not say)."""
        if _URL.match(text):
            return self.url_line(text, where), ""
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            requirement, reason = None, str(exc).splitlines()[0]
        if requirement is not None and requirement.url is not None:  # name @ URL
            requirement.url = self.direct_reference(requirement.url, where)
            return str(requirement), canonical(requirement.name)
        head = _EXTRAS.sub(r"\1", text.split(";", 1)[0].strip())
        if "/" in head or "\\" in head or head.startswith(".") or head.lower().endswith(ARCHIVES):
            return self.path_line(text, where), ""  # as pip reads it: a path
        if requirement is None:
            raise RequirementsError(
                f"{where}: not a requirement ({reason}), a path inside code/ or an allowed "
                f"option ({ALLOWED_TEXT})"
            )
        return str(requirement), canonical(requirement.name)

    def url_line(self, text: str, where: str) -> str:
        """A requirement that is a URL alone (`https://host/pkg.whl`, `file:///...`)."""
        url, _, marker = text.partition("; ")
        url = url.strip()
        if url.lower().startswith("file:"):
            path = unquote(urlsplit(url).path)
            return self.path_line(f"{path};{marker}" if marker else path, where)
        checked = _http_url(url, where, "a requirement", self.wheelhouse)
        return checked + (f" ; {_marker(marker, where)}" if marker else "")

    def direct_reference(self, url: str, where: str) -> str:
        """`name @ URL`'s URL: a file inside code/ (as a file: URL) or http(s)."""
        if url.lower().startswith("file:"):
            path = Path(unquote(urlsplit(url).path))
            real = self.inside(path, f"{where}: a file: URL names a path")
            self.local.append(real)
            return real.as_uri()
        return _http_url(url, where, "a requirement", self.wheelhouse)

    def path_line(self, text: str, where: str) -> str:
        """An archive or project folder inside code/ (`./pkg`, `wheels/x.whl`, extras and a
        marker kept), written relative to code/ (pip's working directory)."""
        path, _, marker = text.partition(";")
        path = path.strip()
        extras = ""
        match = _EXTRAS.match(path)
        if match:
            path, extras = match.group(1), match.group(2)
        real = self.inside(self.root / path, f"{where}: a path names a file or folder")
        self.local.append(real)
        relative = "./" + real.relative_to(self.root).as_posix()
        if not _SAFE_PATH.fullmatch(relative):
            raise RequirementsError(
                f"{where}: a path pip cannot read on a requirement line (spaces, quotes or other "
                "special characters in its name)"
            )
        return relative + extras + (f"; {_marker(marker, where)}" if marker.strip() else "")


# ----- helpers -----------------------------------------------------------------------------------


def _read_text(path: Path, subject: str) -> str:
    """A regular file's text, read once and at most MAX_FILE_BYTES (never a device or a pipe:
    either could hold the read forever or never end). `subject` starts the errors."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise RequirementsError(f"{subject} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RequirementsError(f"{subject} is not a regular file")
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise RequirementsError(f"{subject} is larger than {MAX_FILE_BYTES >> 10} KiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RequirementsError(f"{subject} is not UTF-8 text") from None


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) as pip reads them: a line ending in a backslash joined with the next,
    comments and blank lines dropped."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    first = 0
    # a blank line after the last ends a continued one there
    for number, raw in enumerate([*text.splitlines(), ""], start=1):
        if raw.endswith("\\") and not _COMMENT.match(raw):
            first = first if pending else number
            pending.append(raw.rstrip("\\"))
            continue
        line = _COMMENT.sub("", "".join([*pending, raw])).strip()
        if line:
            out.append((first if pending else number, line))
        pending = []
    return out


def _break(line: str) -> tuple[str, str]:
    """A requirement line's requirement and its options (pip's split: at the first word that
    starts with '-')."""
    words = line.split(" ")
    for index, word in enumerate(words):
        if word.startswith("-"):
            return " ".join(words[:index]).strip(), " ".join(words[index:])
    return line, ""


def _split(text: str, where: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        raise RequirementsError(f"{where}: unbalanced quotes") from None


def _option(tokens: list[str], index: int, where: str) -> tuple[str, str | None, int]:
    """The option at tokens[index]: (long name, value or None, index of the next token)."""
    token = tokens[index]
    spelling, value = token, None
    if token.startswith("--") and "=" in token:
        spelling, value = token.split("=", 1)
    elif not token.startswith("--") and len(token) > 2:
        spelling, value = token[:2], token[2:]  # -rfile.txt
    if spelling in ("-e", "--editable"):
        raise RequirementsError(f"{where}: {spelling} (an editable install) is not allowed")
    if spelling not in ALLOWED:
        raise RequirementsError(f"{where}: {_named(token)} is not allowed ({ALLOWED_TEXT})")
    name, takes_value = ALLOWED[spelling]
    if not takes_value:
        if value is not None:
            raise RequirementsError(f"{where}: {name} takes no value")
        return name, None, index + 1
    if value is None:
        if index + 1 >= len(tokens):
            raise RequirementsError(f"{where}: {name} needs a value")
        return name, tokens[index + 1], index + 2
    return name, value, index + 1


def _named(token: str) -> str:
    """An option as an error may quote it: its name when it looks like one."""
    name = token.split("=", 1)[0]
    return f"option {name}" if _OPTION_NAME.fullmatch(name) else "this option"


def _http_url(url: str, where: str, what: str, wheelhouse: bool = False) -> str:
    if wheelhouse:
        raise RequirementsError(
            f"{where}: a URL is not allowed with code/wheelhouse (its wheels are the only source)"
        )
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise RequirementsError(
            f"{where}: {what} may name http(s) URLs only (no VCS or other URLs)"
        )
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise RequirementsError(f"{where}: a URL with spaces or control characters")
    return url


def _marker(text: str, where: str) -> str:
    try:
        return str(Marker(text.strip()))
    except InvalidMarker as exc:
        raise RequirementsError(f"{where}: not a marker ({str(exc).splitlines()[0]})") from None
