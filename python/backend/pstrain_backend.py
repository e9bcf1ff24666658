"""A PEP 517 build backend for the pure-Python package pstrain, in the
standard library alone (pyproject.toml says why).

A wheel holds pstrain/'s .py files and a .dist-info (METADATA from
pyproject.toml's [project], the version from pstrain/__init__.py's
__version__, WHEEL, RECORD); an sdist holds pyproject.toml, backend/ and
pstrain/.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "pstrain"


def _project():
    """pyproject.toml's [project] table: its strings and lists of strings
    (tomllib where there is one, else those lines read as they are
    written here)."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    project, inside = {}, False
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                inside = line == "[project]"
            m = re.match(r'([\w-]+)\s*=\s*(.*)$', line) if inside else None
            if m:
                items = re.findall(r'"([^"]*)"', m.group(2))
                project[m.group(1)] = items if m.group(2).startswith("[") \
                    else items[0]
    return project


def _version():
    with open(os.path.join(ROOT, PACKAGE, "__init__.py")) as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("pstrain/__init__.py has no __version__")
    return m.group(1)


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"],
             "Version: " + _version(), "Summary: " + p.get("description", ""),
             "Requires-Python: " + p.get("requires-python", ">=3")]
    lines += ["Requires-Dist: " + d for d in p.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _sources():
    """The package's files, relative to ROOT, sorted."""
    out = []
    for top, dirs, files in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.relpath(os.path.join(top, f), ROOT)
                for f in sorted(files) if f.endswith(".py")]
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "%s,sha256=%s,%d" % (name, digest.rstrip(b"=").decode(),
                                len(data))


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    name = "%s-%s" % (PACKAGE, _version())
    info = name + ".dist-info"
    files = []
    for rel in _sources():
        with open(os.path.join(ROOT, rel), "rb") as f:
            files.append((rel.replace(os.sep, "/"), f.read()))
    files.append((info + "/METADATA", _metadata().encode()))
    files.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: "
                  b"pstrain_backend\nRoot-Is-Purelib: true\n"
                  b"Tag: py3-none-any\n"))
    record = [_record_line(n, d) for n, d in files]
    record.append(info + "/RECORD,,")
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = name + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            z.writestr(zipfile.ZipInfo(n, (1980, 1, 1, 0, 0, 0)), d)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    name = "%s-%s" % (PACKAGE, _version())
    rels = ["pyproject.toml", os.path.join("backend", "pstrain_backend.py")]
    rels += _sources()
    tar = name + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, tar), "w:gz") as t:
        for rel in rels:
            t.add(os.path.join(ROOT, rel), arcname=name + "/" + rel)
        info = tarfile.TarInfo(name + "/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return tar
