#!/usr/bin/env python3
"""check_exports.py: softrdma's drop-in libraries against Debian 12's.

For each row of LIBS, compares `readelf -W --dyn-syms` of the system library
with ours (symbol, version, default `@@` or compatibility `@`, type, binding)
and `readelf -V` (version definitions and their parent chain). Any
difference not named in that row's accept list fails the check.

With --sig AUXDIR it also checks the C signatures of our libibverbs'
exports: AUXDIR holds gcc -aux-info output of src/verbs/*.c; every exported
function must be defined there, and a translation unit declaring each
definition beside the system <infiniband/verbs.h> (or, for the functions
that header leaves out, rdma-core 44's own prototype) must compile.

usage: check_exports.py --libdir build/lib [--sysdir DIR] [--sig AUXDIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


class Accept:
    """A difference we were told about: why, and which missing symbols or
    nodes it covers (a predicate on (sym, system library's syms))."""

    def __init__(self, reason, match, extra=False):
        self.reason, self.match, self.hits = reason, match, 0
        self.extra = extra  # covers what we export beyond the system library


def private34(sym, _system):
    return sym.version == "IBVERBS_PRIVATE_34"


def compat_1_0(sym, system):
    return (sym.version == "IBVERBS_1.0" and not sym.default and
            any(s.name == sym.name and s.version == "IBVERBS_1.1" and s.default
                for s in system))


IBVERBS_ACCEPT = [
    Accept("IBVERBS_PRIVATE_34 is rdma-core's interface to its own providers "
           "(ibv_cmd_*, verbs_*, execute_ioctl, ...); our stand-in vendor "
           "libraries replace those providers and import none of it",
           private34),
    Accept("ibv_register_driver@IBVERBS_1.1 registers an rdma-core provider; "
           "there are none to register", lambda s, _: s.name == "ibv_register_driver"),
    Accept("the IBVERBS_1.0 compatibility versions of the 1.1 functions serve "
           "binaries of the 2006 ABI; Debian 12 builds none", compat_1_0),
    Accept("SOFTRDMA_PRIVATE_1 is how our own librdmacm.so.1 reaches the "
           "device's QP1 (src/verbs/priv.c), which the verbs API cannot name",
           lambda s, _: "SOFTRDMA_PRIVATE_1" in (s.version, s.name), extra=True),
]

# soname, accept list, skip with a message when we do not build it yet.
LIBS = [
    ("libibverbs.so.1", IBVERBS_ACCEPT, False),
    ("libmlx5.so.1", [], False),
    ("libefa.so.1", [], False),
    ("librdmacm.so.1", [], False),
]


class Sym:
    def __init__(self, name, version, default, typ, bind):
        self.name, self.version, self.default = name, version, default
        self.typ, self.bind = typ, bind

    def key(self):
        return (self.name, self.version, self.default, self.typ, self.bind)

    def __str__(self):
        at = ("@@" if self.default else "@") + self.version if self.version else ""
        return f"{self.typ} {self.bind} {self.name}{at}"


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def dyn_syms(path):
    out = []
    for line in run("readelf", "-W", "--dyn-syms", path).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit() or f[6] == "UND":
            continue
        name, ver, default = f[7], None, False
        if "@@" in name:
            name, ver = name.split("@@", 1)
            default = True
        elif "@" in name:
            name, ver = name.split("@", 1)
        out.append(Sym(name, ver, default, f[3], f[4]))
    return out


def version_defs(path):
    """[(name, is_base, parent)] from readelf -V's .gnu.version_d."""
    text = run("readelf", "-V", path)
    m = re.search(r"Version definition section.*?(?=\n\S|\Z)", text, re.S)
    if not m:
        return []
    defs = []
    for d in re.finditer(r"Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)"
                         r"((?:\s+0x[0-9a-f]+: Parent \d+: \S+)*)", m.group(0)):
        parents = tuple(re.findall(r"Parent \d+: (\S+)", d.group(3)))
        defs.append((d.group(2), d.group(1) == "BASE", parents))
    return defs


def compare(soname, sysdir, libdir, accepts):
    sysp, ourp = os.path.join(sysdir, soname), os.path.join(libdir, soname)
    failures = []
    system, ours = dyn_syms(sysp), dyn_syms(ourp)
    ours_keys = {s.key() for s in ours}
    sys_keys = {s.key() for s in system}
    for s in sorted(system, key=lambda s: s.key()):
        if s.key() in ours_keys:
            continue
        rule = next((a for a in accepts if not a.extra and a.match(s, system)), None)
        if rule:
            rule.hits += 1
        else:
            failures.append(f"missing {s}")
    for s in sorted(ours, key=lambda s: s.key()):
        if s.key() in sys_keys:
            continue
        rule = next((a for a in accepts if a.extra and a.match(s, system)), None)
        if rule:
            rule.hits += 1
        else:
            failures.append(f"extra   {s}")

    sdefs, odefs = version_defs(sysp), version_defs(ourp)
    snodes = {n: (b, p) for n, b, p in sdefs}
    onodes = {n: (b, p) for n, b, p in odefs}
    for n, (base, parents) in snodes.items():
        if base:
            if onodes.get(n, (False,))[0] is not True:
                failures.append(f"version base (soname) {n} missing")
            continue
        if n not in onodes:
            rule = next((a for a in accepts
                         if not a.extra and a.match(Sym("", n, True, "", ""), system)), None)
            if rule:
                rule.hits += 1
            else:
                failures.append(f"missing version node {n}")
        elif onodes[n] != (base, parents):
            failures.append(f"version node {n}: parents {onodes[n][1]} , system has {parents}")
    for n in onodes:
        if n in snodes:
            continue
        rule = next((a for a in accepts
                     if a.extra and a.match(Sym("", n, True, "", ""), system)), None)
        if rule:
            rule.hits += 1
        else:
            failures.append(f"extra   version node {n}")
    n_sym = len(system)
    return failures, n_sym, len(sdefs)


# Exported functions <infiniband/verbs.h> does not declare: rdma-core 44's
# prototypes (libibverbs/driver.h and marshall.h at tag v44.0).
RDMA_CORE_44_PRIVATE = """
const char *(ibv_get_sysfs_path)(void);
int (ibv_read_sysfs_file)(const char *dir, const char *file, char *buf, size_t size);
int (ibv_dontfork_range)(void *base, size_t size);
int (ibv_dofork_range)(void *base, size_t size);
void (ibv_copy_qp_attr_from_kern)(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void (ibv_copy_ah_attr_from_kern)(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void (ibv_copy_path_rec_from_kern)(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void (ibv_copy_path_rec_to_kern)(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
/* rdma-core's last parameter is enum ibv_gid_type_sysfs * (values 0 and 1,
 * int-sized): the same ABI as int *, which is what ours takes. */
int (ibv_query_gid_type)(struct ibv_context *context, uint8_t port_num,
                         unsigned int index, int *type);
"""
SIG_HEADERS = "#include <infiniband/verbs.h>\n#include <infiniband/sa.h>\n" \
              "#include <rdma/ib_user_sa.h>\n#include <rdma/ib_user_verbs.h>\n"


def check_signatures(libdir, auxdir):
    """Every exported function of our libibverbs is either declared by a
    system header in the translation units that define it (so the compiler
    already held the definition to that prototype: -aux-info lists the
    header's line), or is one of rdma-core 44's private functions, whose
    definition here must be compatible with rdma-core's prototype."""
    exported = sorted({s.name for s in dyn_syms(os.path.join(libdir, "libibverbs.so.1"))
                       if s.typ == "FUNC"})
    header, ours = set(), {}
    for f in sorted(os.listdir(auxdir)):
        for line in open(os.path.join(auxdir, f)):
            # softrdma_priv.h: our private node's one prototype, shared by
            # its definition (priv.c) and its caller (src/cm)
            p = re.match(r"/\* \S+/softrdma_priv\.h:\d+:NC \*/ extern .*?(\w+) \(", line)
            if p:
                header.add(p.group(1))
                continue
            m = re.match(r"/\* (\S+):(\d+):N([CF]) \*/ extern (.*?);? (?:/\*|$)", line)
            if not m:
                continue
            name = re.search(r"(\w+) \(", m.group(4)).group(1)
            if m.group(1).startswith("/usr/include/"):
                header.add(name)
            elif m.group(3) == "F" or name not in ours:
                ours[name] = (m.group(4), m.group(1), m.group(2))
    private = set(re.findall(r"\((\w+)\)\(", RDMA_CORE_44_PRIVATE))
    failures, tu = [], [SIG_HEADERS, RDMA_CORE_44_PRIVATE]
    for name in exported:
        if name in header:
            continue
        if name not in private:
            failures.append(f"{name}: no prototype in the system headers nor among rdma-core "
                            "44's private ones (RDMA_CORE_44_PRIVATE): add it from rdma-core's "
                            "source, tag v44.0")
        elif name not in ours:
            failures.append(f"{name}: exported but not declared in the -aux-info files")
        else:
            proto, path, line = ours[name]
            # (name) keeps a function-like macro of the same name out of the way.
            tu.append(f'#line {line} "{path}"\n' + proto.replace(f"{name} (", f"({name})(", 1)
                      + ";")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "sig.c")
        with open(src, "w") as fh:
            fh.write("\n".join(tu) + "\n")
        r = subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-fsyntax-only", "-Werror", src],
                           capture_output=True, text=True)
        if r.returncode:
            failures.append("definitions that differ from rdma-core 44's prototypes:\n"
                            + r.stderr)
    return failures, len(exported), len(exported) - len(header & set(exported))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--sysdir", default="/usr/lib/x86_64-linux-gnu")
    ap.add_argument("--sig", metavar="AUXDIR")
    a = ap.parse_args()
    bad = 0
    for soname, accepts, optional in LIBS:
        if not os.path.exists(os.path.join(a.sysdir, soname)):
            print(f"FAIL {soname}: no system library in {a.sysdir} to compare with")
            bad += 1
            continue
        if not os.path.exists(os.path.join(a.libdir, soname)):
            if optional:
                print(f"SKIP {soname}: not built yet ({a.libdir}/{soname} does not exist)")
                continue
            print(f"FAIL {soname}: {a.libdir}/{soname} does not exist")
            bad += 1
            continue
        failures, nsym, nver = compare(soname, a.sysdir, a.libdir, accepts)
        for rule in accepts:
            what = "extra" if rule.extra else "missing"
            print(f"  {soname}: accepted {rule.hits} {what}: {rule.reason}")
            if rule.hits == 0:
                print(f"  {soname}: note: that rule matched nothing; it can go")
        if failures:
            bad += 1
            print(f"FAIL {soname}: {len(failures)} differences from the system's")
            for f in failures:
                print(f"    {f}")
        else:
            print(f"OK   {soname}: {nsym} dynamic symbols, {nver} version definitions")
    if a.sig:
        failures, n, npriv = check_signatures(a.libdir, a.sig)
        if failures:
            bad += 1
            print(f"FAIL libibverbs.so.1 signatures: {len(failures)} problems")
            for f in failures:
                print(f"    {f}")
        else:
            print(f"OK   libibverbs.so.1 signatures: {n} exported functions, {n - npriv} "
                  f"held to the system headers' prototypes, {npriv} to rdma-core 44's")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
