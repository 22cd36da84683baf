"""Package data ships: every data file under inductor_ext/ is in the wheel and the sdist, and
a missing calibration table is an error, never coefficients 1.0 in silence."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import inductor_ext
from inductor_ext.targets.ascend import ub as npu_ub

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "inductor_ext"


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


def _data_files() -> list[str]:
    """Tracked files under inductor_ext/ that are not Python sources (and still exist: a
    file moved in the working tree but not yet committed)."""
    return sorted(p for p in _git("ls-files", PACKAGE)
                  if not p.endswith(".py") and (REPO / p).is_file())


def _copy_checkout(dest: pathlib.Path) -> None:
    """The working tree's tracked files and untracked ones git does not ignore, at `dest`."""
    for rel in _git("ls-files", "--cached", "--others", "--exclude-standard"):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """(wheel, sdist) built from a copy of the working tree (tracked and untracked files that
    git does not ignore), so no stale build/ or egg-info of the checkout leaks in and the
    checkout is left as it was. No build isolation: the venv's setuptools, offline."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    for module in ("pip", "setuptools"):
        # uv-made venvs (CI's torch 2.15 one) have neither; the pip venv's run checks it.
        # Asked of the installed distributions, not the import system: setuptools' distutils
        # shim answers find_spec("pip") by switching itself off for the whole process, and a
        # later setuptools import (Inductor's C++ builds) then asserts.
        try:
            importlib.metadata.distribution(module)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{module} is not installed in this venv")
    root = tmp_path_factory.mktemp("packaging")
    src, out = root / "src", root / "dist"
    _copy_checkout(src)
    subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-index",
                    "--no-build-isolation", "-q", "-w", str(out)],
                   cwd=src, check=True, timeout=120)
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                    "build_meta.build_sdist(sys.argv[1])", str(out)],
                   cwd=src, check=True, timeout=120)
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return wheels[0], sdists[0]


def test_data_files_ship_in_wheel_and_sdist(dists):
    wheel, sdist = dists
    data = _data_files()
    assert "inductor_ext/py.typed" in data
    assert any(p.endswith(".json") for p in data), data
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {name: zf.read(name) for name in zf.namelist() if name in data}
    with tarfile.open(sdist) as tf:
        top = tf.getnames()[0].split("/")[0]
        in_sdist = {}
        for rel in data:
            try:
                member = tf.getmember(f"{top}/{rel}")
            except KeyError:
                continue
            fh = tf.extractfile(member)
            assert fh is not None
            in_sdist[rel] = fh.read()
    assert sorted(set(data) - set(in_wheel)) == [], f"missing from {wheel.name}"
    assert sorted(set(data) - set(in_sdist)) == [], f"missing from {sdist.name}"
    for rel in data:
        assert in_wheel[rel] == in_sdist[rel] == (REPO / rel).read_bytes(), rel


#: What only the test harness uses: a shipped module with one of these would make the
#: wheel depend on test tools (transformers' models, pytest) or stub torch_npu (MagicMock).
HARNESS_USES = re.compile(r"^\s*(?:import|from)\s+(?:transformers|pytest|hypothesis|tests)\b"
                          r"|MagicMock|sys\.modules\[[^]]*torch_npu[^]]*\]\s*=", re.M)


def test_wheel_holds_the_package_and_its_entry_point_only(dists):
    """The wheel is the plugin and its torch.backends entry point: no test harness (the
    torch_npu emulation, model workloads, references live in tests/support), no tests."""
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sources = {n: zf.read(n).decode() for n in names if n.endswith(".py")}
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"inductor_ext", "inductor_ext_autoload"}
    assert "inductor_ext_autoload/__init__.py" in names
    assert not [n for n in names if "/testing/" in n or "/tests/" in n or "support" in n]
    offenders = [f"{name}: {found.group(0).strip()}" for name, text in sorted(sources.items())
                 for found in HARNESS_USES.finditer(text)]
    assert offenders == []
    # Every package source of the checkout is in the wheel (nothing dropped by the move).
    tracked = {p for p in _git("ls-files", "inductor_ext", "inductor_ext_autoload")
               if p.endswith(".py") and (REPO / p).is_file()}
    assert tracked - set(sources) == set()


def test_setup_py_shim_answers_from_pyproject(tmp_path):
    """`python setup.py --version` / `--name` (tools that still call setup.py) give
    pyproject.toml's answers; the shim passes setup() nothing of its own."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    try:
        importlib.metadata.distribution("setuptools")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("setuptools is not installed in this venv")
    tree = ast.parse((REPO / "setup.py").read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert [(ast.unparse(c.func), c.args, c.keywords) for c in calls] == [("setup", [], [])]
    _copy_checkout(tmp_path)
    for flag, expected in (("--version", inductor_ext.__version__), ("--name", PACKAGE)):
        res = subprocess.run([sys.executable, "setup.py", flag], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip().splitlines()[-1] == expected


def test_sdist_ships_the_setup_py_shim(dists):
    _, sdist = dists
    with tarfile.open(sdist) as tf:
        top = tf.getnames()[0].split("/")[0]
        assert f"{top}/setup.py" in tf.getnames()


def test_wheel_calibration_table_is_the_repos(dists):
    wheel, _ = dists
    rel = npu_ub.CALIBRATION_FILE.relative_to(pathlib.Path(inductor_ext.__file__).parent)
    with zipfile.ZipFile(wheel) as zf:
        shipped = json.loads(zf.read(f"{PACKAGE}/{rel.as_posix()}"))
    assert shipped == json.loads(npu_ub.CALIBRATION_FILE.read_text())
    assert shipped["families"]


@pytest.fixture
def calibration_at(monkeypatch):
    """`calibration_at(path)`: npu_ub reads its table from `path` (cache cleared, and
    cleared again afterwards so later tests read the real table)."""
    def point(path: pathlib.Path) -> None:
        monkeypatch.setattr(npu_ub, "CALIBRATION_FILE", path)
        npu_ub.calibration.cache_clear()

    yield point
    npu_ub.calibration.cache_clear()


def _layout() -> npu_ub.Layout:
    return npu_ub.Layout(block_m=4, cols=768, row_elem_bytes=12, partials=1, looped=False,
                         multibuffer=True)


def test_missing_calibration_is_an_error(tmp_path, calibration_at):
    missing = tmp_path / "ub_calibration.json"
    calibration_at(missing)
    with pytest.raises(npu_ub.CalibrationMissing, match="reinstall inductor_ext") as info:
        npu_ub.calibration()
    assert str(missing) in str(info.value)
    with pytest.raises(npu_ub.CalibrationMissing):  # not an estimate with coefficients 1.0
        npu_ub.estimate(_layout())


@pytest.mark.parametrize("text", ["{not json", "[]", '{"points": []}', '{"families": []}'])
def test_unreadable_calibration_is_an_error(tmp_path, calibration_at, text):
    bad = tmp_path / "ub_calibration.json"
    bad.write_text(text)
    calibration_at(bad)
    with pytest.raises(npu_ub.CalibrationMissing, match="unreadable") as info:
        npu_ub.calibration()
    assert str(bad) in str(info.value)


def test_ci_runs_the_readme_test_command_verbatim():
    """.ci/run calls the README's test command as written (the quick start's second block)."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_command = next(b for b in blocks if "pytest" in b and "python3 -m venv" in b)
    assert test_command in (REPO / ".ci" / "run").read_text()
