"""What LLVM knows about x86 CPUs, asked in a throw-away process.

Run as a script (never imported by tensorlang: LLVM aborts the process it runs in when given a
CPU it cannot generate 64-bit code for, and prints its CPU list only to stderr)::

    python _cpu_probe.py list                  -> LLVM's CPU and feature lists (its -mcpu=help)
    python _cpu_probe.py cpu NAME FEAT,FEAT,.. -> the features in FEAT that CPU NAME implies,
                                                  then whether it generates x86-64 code

Implied features are found with the inliner, which needs no access to LLVM's CPU tables: a
function whose target-features are not a subset of its caller's features is never inlined into
it (X86TTIImpl::areInlineCompatible), so after optimizing a caller for ``-mcpu=NAME`` that calls
one tiny function per feature, the functions still called are those NAME does not imply. This
runs for the i386 triple, which accepts every CPU; the 64-bit check comes last because a CPU
without 64-bit support aborts the process there (the parent reads that as "32-bit only").

Output: lines of JSON on stdout, one per answer, after a "TLPROBE " prefix.
"""

import json
import sys

import llvmlite.binding as llvm

PREFIX = "TLPROBE "


def _say(obj) -> None:
    sys.stdout.write(PREFIX + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _init():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def list_cpus_and_features() -> None:
    """LLVM prints the lists when asked for CPU "help"; the parent parses them from stderr."""
    _init()
    llvm.Target.from_triple("x86_64-unknown-linux-gnu").create_target_machine(cpu="help")
    sys.stdout.flush()
    _say({"done": True})


def _probe_module(cpu: str, features: list[str]) -> str:
    triple = "i386-unknown-linux-gnu"
    lines = [f'target triple = "{triple}"', "@sink = global i32 0"]
    for i, feat in enumerate(features):
        lines.append(f"define internal void @f{i}() #{i + 1} {{\n"
                     f"  store volatile i32 {i}, ptr @sink\n  ret void\n}}")
        lines.append(f'attributes #{i + 1} = {{ nounwind "target-cpu"="i386" '
                     f'"target-features"="+{feat}" }}')
    calls = "\n".join(f"  call void @f{i}()" for i in range(len(features)))
    lines.append(f"define void @caller() #0 {{\n{calls}\n  ret void\n}}")
    lines.append(f'attributes #0 = {{ nounwind "target-cpu"="{cpu}" }}')
    return "\n".join(lines)


def implied_features(cpu: str, features: list[str]) -> list[str]:
    mod = llvm.parse_assembly(_probe_module(cpu, features))
    mod.verify()
    tm = llvm.Target.from_triple("i386-unknown-linux-gnu").create_target_machine(opt=2)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
    pb.getModulePassManager().run(mod, pb)
    optimized = str(mod)
    return [f for i, f in enumerate(features) if f"@f{i}(" not in optimized]


def generates_x86_64(cpu: str) -> bool:
    """Aborts the process (LLVM ERROR) when ``cpu`` has no 64-bit mode."""
    tm = llvm.Target.from_triple("x86_64-unknown-linux-gnu").create_target_machine(cpu=cpu)
    mod = llvm.parse_assembly("define i64 @f(i64 %x) {\n  ret i64 %x\n}\n")
    tm.emit_object(mod)
    return True


def main(argv: list[str]) -> int:
    if argv[:1] == ["list"]:
        list_cpus_and_features()
        return 0
    if len(argv) == 3 and argv[0] == "cpu":
        _init()
        cpu, features = argv[1], [f for f in argv[2].split(",") if f]
        _say({"implied": implied_features(cpu, features)})
        _say({"x86_64": generates_x86_64(cpu)})
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
