"""code/requirements.txt read and checked before pip sees it (environments/requirements.py):
what is allowed is rewritten for pip, anything else refused naming the file and line, never
quoting a file outside code/."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from sagemaker_serving.environments.requirements import (
    MAX_FILE_BYTES,
    RequirementsError,
    read,
)

HASH = "sha256:" + "ab" * 32


@pytest.fixture
def code(tmp_path) -> Path:
    directory = tmp_path / "model" / "code"
    (directory / "wheels").mkdir(parents=True)
    (directory / "wheels" / "mine-1.0-py3-none-any.whl").write_bytes(b"PK")
    (directory / "project").mkdir()
    (directory / "project" / "pyproject.toml").write_text("")
    return directory


def checked(code: Path, text: str):
    (code / "requirements.txt").write_text(text)
    return read(code)


def refusal(code: Path, text: str) -> str:
    with pytest.raises(RequirementsError) as info:
        checked(code, text)
    return str(info.value)


def test_requirements_and_allowed_options_are_rewritten_for_pip(code):
    (code / "more.txt").write_text("requests<3 \\\n  ; python_version > '3'\n-c pins.txt\n")
    (code / "pins.txt").write_text("# pinned\nurllib3==2.0.0\n")
    text = f"""
        # a comment
        NumPy==1.26.4 --hash={HASH}  # trailing comment
        pillow[extra]>=10
        --pre --prefer-binary
        --only-binary=:all:
        -i https://pypi.example/simple
        --extra-index-url https://mirror.example/simple
        -f wheels
        -r more.txt
        ./project[x]; python_version > "3"
        wheels/mine-1.0-py3-none-any.whl
        other @ https://files.example/other-1.0.whl
        mine @ file://{code}/wheels/mine-1.0-py3-none-any.whl
    """
    result = checked(code, "\n".join(line.strip() for line in text.splitlines()))
    assert result.lines == (
        f"numpy==1.26.4 --hash={HASH}".replace("numpy", "NumPy"),
        "pillow[extra]>=10",
        "--pre",
        "--prefer-binary",
        "--only-binary :all:",
        "--index-url https://pypi.example/simple",
        "--extra-index-url https://mirror.example/simple",
        f"--find-links {shlex.quote(str(code / 'wheels'))}",
        'requests<3; python_version > "3"',
        './project[x]; python_version > "3"',
        "./wheels/mine-1.0-py3-none-any.whl",
        "other @ https://files.example/other-1.0.whl",
        f"mine @ {(code / 'wheels' / 'mine-1.0-py3-none-any.whl').as_uri()}",
    )
    assert result.constraints == ("urllib3==2.0.0",)
    assert result.names == ("numpy", "pillow", "requests", "other", "mine")
    assert set(result.local) == {
        code / "wheels",
        code / "project",
        code / "wheels" / "mine-1.0-py3-none-any.whl",
    }


def test_what_pip_gets_is_our_file_with_its_constraints(code, tmp_path):
    (code / "pins.txt").write_text("urllib3==2.0.0\n")
    result = checked(code, "requests\n-c pins.txt\n")
    written = result.write(tmp_path)
    constraints = tmp_path / "constraints.txt"
    assert written.read_text() == f"--constraint {constraints}\nrequests\n"
    assert constraints.read_text() == "urllib3==2.0.0\n"


SECRET = "root:x:0:0"


@pytest.mark.parametrize(
    "line",
    [
        "-r /etc/passwd",
        "-c /etc/passwd",
        "--requirement=/etc/passwd",
        "-r/etc/passwd",
        "-r ../../outside.txt",
        "-r /proc/self/environ",
        "-r /dev/zero",
        "-r link.txt",  # a link inside code/ to a file outside
    ],
)
def test_a_file_outside_code_is_never_read_nor_quoted(code, tmp_path, line):
    (tmp_path / "outside.txt").write_text(SECRET + "\n")
    (code / "link.txt").symlink_to(tmp_path / "outside.txt")
    message = refusal(code, f"numpy\n\n{line}\n")
    assert message.startswith("code/requirements.txt line 3: ")
    assert "outside code/" in message and SECRET not in message


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("-e .", "-e (an editable install) is not allowed"),
        ("--editable=project", "--editable (an editable install)"),
        ("--trusted-host example.com", "option --trusted-host is not allowed"),
        ("--use-feature=x", "option --use-feature is not allowed"),
        ("numpy --config-settings=a=b", "option --config-settings is not allowed after"),
        ("numpy --global-option=x", "option --global-option is not allowed after"),
        ("numpy --hash=md5:abc", "--hash takes sha256"),
        ("git+https://example.com/repo.git", "http(s) URLs only"),
        ("pkg @ git+https://example.com/repo.git", "http(s) URLs only"),
        ("-i file:///simple", "http(s) URLs only"),
        ("-i ./simple", "takes an http(s) URL"),
        ("-r https://example.com/r.txt", "names a URL"),
        ("--extra-index-url https://x@${AWS_SECRET_ACCESS_KEY}/", "environment variables"),
        ("pkg @ file:///etc", "outside code/"),
        ("/etc", "outside code/"),
        ("../../elsewhere", "outside code/"),
        ("./missing", "does not exist inside code/"),
        ("root:x:0:0:root", "not a requirement"),
        ("--only-binary 'a b'", "takes :all:, :none: or names"),
        ("--pre=yes", "--pre takes no value"),
        ("-c", "--constraint needs a value"),
        ("--pre 'unclosed", "unbalanced quotes"),
    ],
)
def test_anything_else_is_refused_naming_the_line_and_why(code, line, words):
    message = refusal(code, f"# first\n{line}\n")
    assert message.startswith("code/requirements.txt line 2: ") and words in message, message


@pytest.mark.parametrize(
    "line",
    [
        "-f wheels",
        "-i https://pypi.example/simple",
        "--extra-index-url https://mirror.example/simple",
        "https://files.example/x-1.0.whl",
        "x @ https://files.example/x-1.0.whl",
    ],
)
def test_with_a_wheelhouse_no_index_link_or_url(code, line):
    (code / "wheelhouse").mkdir()
    message = refusal(code, f"{line}\n")
    assert message.startswith("code/requirements.txt line 1: ") and "wheelhouse" in message


def test_a_wheelhouse_holds_no_link_out_of_code(code, tmp_path):
    (code / "wheelhouse").mkdir()
    (tmp_path / "private.whl").write_bytes(b"PK")
    (code / "wheelhouse" / "private.whl").symlink_to(tmp_path / "private.whl")
    message = refusal(code, "private\n")
    assert message.startswith("code/wheelhouse is holding a link outside code/"), message


def test_files_that_could_hang_or_flood_the_reader_are_refused(code):
    os.mkfifo(code / "pipe")
    assert "not a regular file" in refusal(code, "-r pipe\n")
    (code / "huge.txt").write_text("#" * (MAX_FILE_BYTES + 1))
    assert f"larger than {MAX_FILE_BYTES >> 10} KiB" in refusal(code, "-r huge.txt\n")
    (code / "latin.txt").write_bytes(b"caf\xe9\n")
    assert "not UTF-8 text" in refusal(code, "-c latin.txt\n")
    (code / "loop.txt").write_text("-r loop.txt\n")
    message = refusal(code, "-r loop.txt\n")
    assert message.startswith("code/loop.txt line 1: --requirement names a file already read")


def test_a_requirements_txt_that_links_out_of_code_is_refused(code, tmp_path):
    (tmp_path / "elsewhere.txt").write_text(SECRET + "\n")
    (code / "requirements.txt").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(RequirementsError) as info:
        read(code)
    assert "outside code/" in str(info.value) and SECRET not in str(info.value)


def test_continued_lines_keep_the_number_of_their_first(code):
    message = refusal(code, "numpy\nrequests \\\n  >=2 \\\n  --trusted-host x\n")
    assert message.startswith("code/requirements.txt line 2: option --trusted-host")
