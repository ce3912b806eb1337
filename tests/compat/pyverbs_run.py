#!/usr/bin/env python3
"""pyverbs_run.py LIBDIR SKIPLIST: rdma-core's own test suite (Debian's
python3-pyverbs, /usr/share/doc/rdma-core/tests) on softrdma.

The suite is copied to a temporary directory and its gzipped files are
unpacked (the files themselves are unchanged), then its generic modules run
in one process with LD_LIBRARY_PATH=LIBDIR. Vendor modules (mlx5, efa),
CUDA and rdma_cm are not ours here. The run fails on any failure or error,
and on any skip that SKIPLIST does not allow; SKIPLIST lines are
`<test id or fnmatch pattern> | <reason>`.

Three of the suite's tests need 2 MiB huge pages (MAP_HUGETLB). Run as
root, the runner reserves a few for the run when fewer are free
(/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) and gives back what
it added afterwards. When it cannot (not root, or the kernel has none to
give) and none are free, those tests skip ("There are no huge pages of
size 2M allocated") and the runner allows that skip for this run only.

Environment: SR_PYVERBS_SUITE (default /usr/share/doc/rdma-core/tests),
SR_PYVERBS_ONLY (space-separated module or test ids to run instead of all),
SR_PYVERBS_TEST_TIMEOUT (seconds one test may take, default 60).
"""
import fnmatch
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

SUITE = os.environ.get('SR_PYVERBS_SUITE', '/usr/share/doc/rdma-core/tests')
EXCLUDE = ('test_mlx5_*', 'test_efa*', '*efadv*', '*cuda*', 'test_rdmacm*')


def generic_modules(d):
    mods = []
    for fn in sorted(os.listdir(d)):
        if not (fn.startswith('test_') and fn.endswith('.py')):
            continue
        m = fn[:-3]
        if not any(fnmatch.fnmatch(m, p) for p in EXCLUDE):
            mods.append(m)
    return mods


def unpack(dst):
    tests = os.path.join(dst, 'tests')
    shutil.copytree(SUITE, tests)
    for fn in os.listdir(tests):
        if fn.endswith('.gz'):
            p = os.path.join(tests, fn)
            with gzip.open(p, 'rb') as src, open(p[:-3], 'wb') as out:
                shutil.copyfileobj(src, out)
            os.unlink(p)
    return tests


HUGE_NR = '/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages'
HUGE_FREE = '/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages'
HUGE_WANT = 8  # the suite maps one 2 MiB page per resource, a few at once


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def reserve_huge_pages():
    """Pages this run added to the pool (0: none, not root, or the kernel
    would not give them)."""
    if os.geteuid() != 0 or not os.path.exists(HUGE_NR):
        return 0
    try:
        need = HUGE_WANT - read_int(HUGE_FREE)
        if need <= 0:
            return 0
        before = read_int(HUGE_NR)
        with open(HUGE_NR, 'w') as f:
            f.write(str(before + need))
        added = read_int(HUGE_NR) - before  # the kernel grants what it can
        print(f'note: reserved {added} huge pages of 2 MiB for the run')
        return max(added, 0)
    except OSError as ex:
        print(f'note: no huge pages reserved ({ex})')
        return 0


# The tests that map 2 MiB huge pages: allowed to skip only when the run
# could not have them.
HUGE_TESTS = ('tests.test_odp.OdpTestCase.test_odp_rc_huge*',
              'tests.test_parent_domain.ParentDomainTrafficTest.test_huge_page_traffic')


def huge_pages_free():
    try:
        return read_int(HUGE_FREE)
    except OSError:
        return 0


def release_huge_pages(added):
    # Take back only what was added: another run may have reserved more.
    if added:
        with open(HUGE_NR, 'w') as f:
            f.write(str(max(read_int(HUGE_NR) - added, 0)))


def read_skiplist(path):
    allowed = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            pat, sep, reason = line.partition('|')
            if not sep or not reason.strip():
                sys.exit(f'{path}: entry without a reason: {line}')
            allowed.append((pat.strip(), reason.strip()))
    return allowed


# Runs inside the child: the suite's package is importable as `tests`, as
# its run_tests.py arranges, and its argument parser has run.
CHILD = r'''
import faulthandler, json, sys, unittest
top = sys.argv[1]
sys.path.insert(0, top + '/tests')
sys.path.insert(0, top)
from args_parser import parser
sys.argv[1:] = []
parser.parse_args()
timeout = float(sys.argv_timeout)
names = sys.argv_names

class Result(unittest.TextTestResult):
    def startTest(self, test):
        faulthandler.dump_traceback_later(timeout, exit=True)
        super().startTest(test)
    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)

loader = unittest.TestLoader()
suite = unittest.TestSuite()
for n in names:
    suite.addTests(loader.loadTestsFromName('tests.' + n))
r = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Result).run(suite)
out = {'run': r.testsRun,
       'failures': [t.id() for t, _ in r.failures],
       'errors': [t.id() for t, _ in r.errors],
       'unexpected_successes': [t.id() for t in r.unexpectedSuccesses],
       'skips': [[t.id(), why] for t, why in r.skipped]}
with open(top + '/result.json', 'w') as f:
    json.dump(out, f)
'''


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    libdir, skiplist = os.path.abspath(sys.argv[1]), sys.argv[2]
    allowed = read_skiplist(skiplist)
    tmp = tempfile.mkdtemp(prefix='sr-pyverbs-')
    huge = reserve_huge_pages()
    if not huge and huge_pages_free() == 0:
        allowed += [(t, 'no 2 MiB huge pages free and none could be reserved (run as root)')
                    for t in HUGE_TESTS]
    try:
        tests = unpack(tmp)
        names = os.environ.get('SR_PYVERBS_ONLY', '').split() or generic_modules(tests)
        env = dict(os.environ, LD_LIBRARY_PATH=libdir, PYTHONDONTWRITEBYTECODE='1')
        timeout = os.environ.get('SR_PYVERBS_TEST_TIMEOUT', '60')
        code = ('import sys; sys.argv_timeout = %r; sys.argv_names = %r\n' % (timeout, names)
                + CHILD)
        # Debian's interpreter: python3-pyverbs is built for it, whatever
        # else is first on PATH.
        rc = subprocess.run(['/usr/bin/python3', '-c', code, tmp], env=env, cwd=tmp).returncode
        res_path = os.path.join(tmp, 'result.json')
        if not os.path.exists(res_path):
            print(f'FAIL: the suite did not finish (exit status {rc})')
            return 1
        import json
        with open(res_path) as f:
            res = json.load(f)
    finally:
        release_huge_pages(huge)
        shutil.rmtree(tmp, ignore_errors=True)

    bad = []
    for kind in ('failures', 'errors', 'unexpected_successes'):
        for t in res[kind]:
            bad.append(f'{kind[:-1] if kind != "unexpected_successes" else "unexpected success"}: {t}')
    used = set()
    for tid, why in res['skips']:
        hit = [p for p, _ in allowed if fnmatch.fnmatch(tid, p)]
        if hit:
            used.update(hit)
        else:
            bad.append(f'skip not allowed: {tid}: {why}')
    for p, reason in allowed:
        if p not in used:
            print(f'note: allowed skip {p} ({reason}) did not happen')
    nf, ne, ns = len(res['failures']), len(res['errors']), len(res['skips'])
    print(f'pyverbs: {res["run"]} run, {res["run"] - nf - ne - ns} passed, {nf} failed, '
          f'{ne} errors, {ns} skipped ({len(names)} modules)')
    for b in bad:
        print('not accepted:', b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
