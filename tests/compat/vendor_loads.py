#!/usr/bin/env python3
"""vendor_loads.py LIBDIR CASE: Debian programs that link the vendor
libraries directly (libmlx5.so.1, libefa.so.1) load with
LD_LIBRARY_PATH=LIBDIR: no symbol or version lookup error, no signal, no
hang, and each answers what it answers when it has loaded.

CASE is one of: ucx, fabric_tcp, fabric_efa, pyverbs, rdma_core_tests.
"""
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

PY = "/usr/bin/python3"  # Debian's, which has pyverbs (not a pyenv one)
PYVERBS = "/usr/lib/python3/dist-packages/pyverbs"
RDMA_CORE_TESTS = "/usr/share/doc/rdma-core/tests"
# What ld.so and dlopen say when an import is missing.
LOADER_ERROR = re.compile(r"symbol lookup error|undefined symbol|version `[^']*' not found|"
                          r"cannot open shared object|dlopen\(.*\) failed")


def run(libdir, cmd, env=None, cwd=None, timeout=60):
    e = dict(os.environ, LD_LIBRARY_PATH=libdir, **(env or {}))
    try:
        r = subprocess.run(cmd, env=e, cwd=cwd, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    return r.returncode, r.stdout + r.stderr


def check(name, rc, out, want=None, want_rc=0):
    """Fail on a loader error, a signal, a hang, the wrong exit status, or
    a missing line that shows the program got past loading."""
    problems = []
    if rc is None:
        problems.append(out)
    else:
        for line in out.splitlines():
            if LOADER_ERROR.search(line):
                problems.append(f"loader error: {line.strip()}")
        if rc < 0:
            problems.append(f"killed by signal {-rc}")
        elif want_rc is not None and rc != want_rc:
            problems.append(f"exit status {rc}, expected {want_rc}")
        if want and not re.search(want, out, re.M):
            problems.append(f"no output matching /{want}/")
    print(f"{'FAIL' if problems else 'OK  '} {name}" + (f" (exit {rc})" if rc is not None else ""))
    for p in problems[:20]:
        print(f"    {p}")
    return not problems


def case_ucx(libdir):
    # libuct_ib links libmlx5.so.1; once loaded it loads its own modules and
    # opens each device through one of its memory-domain ops.
    rc, out = run(libdir, ["ucx_info", "-d"], env={"UCX_LOG_LEVEL": "debug"})
    return check("ucx_info -d loads libuct_ib", rc, out, want=r"loading modules for uct_ib")


def case_fabric_tcp(libdir):
    # libfabric.so.1 links libefa.so.1 (EFA_1.2): without it nothing runs.
    rc, out = run(libdir, ["fi_info", "-p", "tcp"])
    return check("fi_info -p tcp", rc, out, want=r"^provider: tcp")


def case_fabric_efa(libdir):
    # The efa provider asks efadv_query_device about each device; ours is
    # not an EFA one, so it finds nothing: fi_getinfo's -FI_ENODATA (61).
    rc, out = run(libdir, ["fi_info", "-p", "efa"])
    return check("fi_info -p efa finds no EFA device", rc, out, want=r"fi_getinfo: -61",
                 want_rc=61)


def case_pyverbs(libdir):
    mods = sorted(
        "pyverbs.providers." + os.path.relpath(p, PYVERBS + "/providers").split(".")[0]
        .replace("/", ".") for p in glob.glob(PYVERBS + "/providers/*/*.so"))
    if not mods:
        print(f"FAIL pyverbs: no provider modules under {PYVERBS}/providers")
        return False
    code = "import importlib\n" + "".join(
        f"importlib.import_module({m!r}); print('imported', {m!r})\n" for m in mods)
    rc, out = run(libdir, [PY, "-c", code])
    ok = check(f"pyverbs: {len(mods)} provider modules import", rc, out,
               want=re.escape(f"imported {mods[-1]}"))
    # And they answer for our device as for any device not their own:
    # mlx5dv_is_supported() is false, efadv_query_device() EOPNOTSUPP.
    code = ("from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DVContextAttr\n"
            "from pyverbs.providers.efa.efadv import EfaContext\n"
            "import pyverbs.device as d\n"
            "name = d.get_device_list()[0].name.decode()\n"
            "try:\n    Mlx5Context(Mlx5DVContextAttr(), name=name)\n"
            "except Exception as e:\n    print('mlx5:', type(e).__name__, e)\n"
            "try:\n    EfaContext(name=name).query_efa_device()\n"
            "except Exception as e:\n    print('efa:', type(e).__name__, e)\n")
    rc, out = run(libdir, [PY, "-c", code])
    print(out.strip())
    ok2 = check("pyverbs: mlx5 refuses our device", rc, out,
                want=r"^mlx5: PyverbsUserError This is not an MLX5 device")
    ok3 = check("pyverbs: efadv_query_device says EOPNOTSUPP", rc, out,
                want=r"^efa: PyverbsRDMAError .*Errno: 95")
    return ok and ok2 and ok3


def case_rdma_core_tests(libdir):
    # rdma-core's own suite (partly gzipped in the Debian package): every
    # module must import; a SkipTest for a missing Python package is fine.
    with tempfile.TemporaryDirectory() as d:
        dst = os.path.join(d, "tests")
        os.mkdir(dst)
        for p in glob.glob(RDMA_CORE_TESTS + "/*.py*"):
            base = os.path.basename(p)
            if base.endswith(".gz"):
                with gzip.open(p, "rb") as src, open(os.path.join(dst, base[:-3]), "wb") as out:
                    shutil.copyfileobj(src, out)
            else:
                shutil.copy(p, dst)
        mods = sorted(os.path.basename(p)[:-3] for p in glob.glob(dst + "/*.py")
                      if not p.endswith(("/__init__.py", "/run_tests.py")))
        code = ("import sys, unittest, importlib\nsys.argv = ['x']\nfor m in sys.argv[1:] or %r:\n"
                "    try:\n        importlib.import_module('tests.' + m)\n"
                "    except unittest.SkipTest as e:\n        print('skipped', m, e)\n"
                "    print('imported', m)\n") % (mods,)
        rc, out = run(libdir, [PY, "-c", code], env={"PYTHONPATH": dst}, cwd=d, timeout=120)
        return check(f"rdma-core tests: {len(mods)} modules import", rc, out,
                     want=re.escape(f"imported {mods[-1]}"))


CASES = {"ucx": case_ucx, "fabric_tcp": case_fabric_tcp, "fabric_efa": case_fabric_efa,
         "pyverbs": case_pyverbs, "rdma_core_tests": case_rdma_core_tests}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} LIBDIR {{{'|'.join(CASES)}}}")
    sys.exit(0 if CASES[sys.argv[2]](os.path.abspath(sys.argv[1])) else 1)
