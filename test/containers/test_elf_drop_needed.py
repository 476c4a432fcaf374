"""scripts/containers/elf_drop_needed.py on small libraries built here with the system's C
compiler: a library `user` needs `dep` (a versioned symbol, as libtorch_cpu needs
libcudart.so.13's). After the edit `user` loads without `dep` and works while the dropped
function is not called; a call ends the process with the loader's "undefined symbol"; the
edit is refused, leaving the file unchanged, where the symbol would be bound at load time."""
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "containers" / "elf_drop_needed.py"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None or sys.platform != "linux", reason="needs a C compiler on Linux")

spec = importlib.util.spec_from_file_location("elf_drop_needed", SCRIPT)
elf_drop_needed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(elf_drop_needed)


def cc(*args):
    subprocess.run([CC, *map(str, args)], check=True, capture_output=True)


def needed(path):
    out = subprocess.run(["readelf", "-dW", str(path)], check=True, capture_output=True, text=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


@pytest.fixture
def libs(tmp_path):
    """Builds libdep.so.1 (version node DEP_1) and returns a function that builds a `user`
    library from C source, linked to it, with extra linker flags."""
    (tmp_path / "dep.c").write_text("int dep_fn(void) { return 41; }\n")
    (tmp_path / "dep.map").write_text("DEP_1 { global: dep_fn; local: *; };\n")
    cc("-shared", "-fPIC", "-o", tmp_path / "libdep.so.1", "-Wl,-soname,libdep.so.1",
       f"-Wl,--version-script={tmp_path / 'dep.map'}", tmp_path / "dep.c")
    (tmp_path / "libdep.so").symlink_to("libdep.so.1")

    def build(source, *flags, name="libuser.so"):
        (tmp_path / "user.c").write_text(textwrap.dedent(source))
        cc("-shared", "-fPIC", "-o", tmp_path / name, tmp_path / "user.c", f"-L{tmp_path}", "-ldep",
           "-Wl,--no-as-needed", "-Wl,-rpath,$ORIGIN", *flags)
        return tmp_path / name

    return build


CALLS_DEP = """
    int dep_fn(void);
    int user_ok(void) { return 7; }
    int user_calls_dep(void) { return dep_fn() + 1; }
"""

# A program linked to libuser.so (as the server is to libtorch_cpu.so), loaded the way the
# loader loads an executable's libraries (lazily; ctypes' dlopen would bind everything at
# once): calls user_ok, then, given an argument, user_calls_dep.
MAIN = """
    #include <stdio.h>
    int user_ok(void);
    int user_calls_dep(void);
    int main(int argc, char** argv) {
      printf("ok %d\\n", user_ok());
      fflush(stdout);
      if (argc > 1) printf("dep %d\\n", user_calls_dep());
      return 0;
    }
"""


def program(user):
    folder = user.parent
    (folder / "main.c").write_text(textwrap.dedent(MAIN))
    cc("-o", folder / "main", folder / "main.c", f"-L{folder}", "-luser", "-Wl,-rpath,$ORIGIN")
    return folder / "main"


def load(main, *args):
    return subprocess.run([str(main), *args], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})


def test_dropped_library_is_not_needed_and_the_rest_works(libs, tmp_path):
    user = libs(CALLS_DEP)
    main = program(user)
    assert load(main, "call").stdout.split() == ["ok", "7", "dep", "42"], "before: works with libdep present"
    (tmp_path / "libdep.so.1").unlink()
    before = load(main)
    assert before.returncode != 0 and "libdep.so.1" in before.stderr, "without libdep the unedited library fails"

    counts = elf_drop_needed.drop_needed(str(user), ["libdep.so.1"])
    assert counts == {"libdep.so.1": 1}
    assert "libdep.so.1" not in needed(user)
    versions = subprocess.run(["readelf", "-VW", str(user)], check=True, capture_output=True, text=True).stdout
    assert "libdep.so.1" not in versions and "DEP_1" not in versions
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(user)], check=True, capture_output=True, text=True).stdout
    assert [line.split()[-1] for line in symbols.splitlines() if "dep_fn" in line] == ["dep_fn"], "unversioned"

    after = load(main)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == ["ok", "7"]
    called = load(main, "call")
    assert called.returncode != 0
    assert "undefined symbol: dep_fn" in called.stderr


@pytest.mark.parametrize("drop", [["libdep.so.1"], ["libdep2.so.1"], ["libdep.so.1", "libdep2.so.1"]])
def test_any_version_needed_entry_can_go(libs, tmp_path, drop):
    # Two versioned dependencies: the one dropped may have the first version-needed entry
    # (the one DT_VERNEED points at) or a later one.
    (tmp_path / "dep2.c").write_text("int dep2_fn(void) { return 5; }\n")
    (tmp_path / "dep2.map").write_text("DEP2_1 { global: dep2_fn; local: *; };\n")
    cc("-shared", "-fPIC", "-o", tmp_path / "libdep2.so.1", "-Wl,-soname,libdep2.so.1",
       f"-Wl,--version-script={tmp_path / 'dep2.map'}", tmp_path / "dep2.c")
    (tmp_path / "libdep2.so").symlink_to("libdep2.so.1")
    user = libs("""
        #include <stdio.h>
        int dep_fn(void);
        int dep2_fn(void);
        int user_ok(void) { return printf("%s", "") + 7; }
        int user_calls_dep(void) { return dep_fn() + dep2_fn() - 4; }
    """, "-ldep2")
    main = program(user)
    assert load(main, "call").stdout.split() == ["ok", "7", "dep", "42"]
    elf_drop_needed.drop_needed(str(user), drop)
    for lib in drop:
        (tmp_path / lib).unlink()
    versions = subprocess.run(["readelf", "-VW", str(user)], check=True, capture_output=True, text=True).stdout
    kept_files = [line.split("File: ")[1].split()[0] for line in versions.splitlines() if "File: " in line]
    assert "libc.so.6" in kept_files and not set(drop) & set(kept_files)
    assert sorted(set(needed(user)) & {"libdep.so.1", "libdep2.so.1"}) == sorted({"libdep.so.1", "libdep2.so.1"} - set(drop))
    result = load(main)
    assert result.returncode == 0 and result.stdout.split() == ["ok", "7"], result.stderr
    assert "undefined symbol" in load(main, "call").stderr


def test_refused_when_bound_at_load_time(libs):
    user = libs(CALLS_DEP, "-Wl,-z,now")
    original = user.read_bytes()
    with pytest.raises(elf_drop_needed.Refused, match="load time"):
        elf_drop_needed.drop_needed(str(user), ["libdep.so.1"])
    assert user.read_bytes() == original


def test_refused_when_the_symbol_is_used_other_than_by_a_call(libs):
    # Taking the function's address needs a relocation resolved when the library loads.
    user = libs("""
        int dep_fn(void);
        int (*user_pointer(void))(void) { return dep_fn; }
    """)
    original = user.read_bytes()
    with pytest.raises(elf_drop_needed.Refused, match="relocation"):
        elf_drop_needed.drop_needed(str(user), ["libdep.so.1"])
    assert user.read_bytes() == original


def test_refused_when_the_library_is_not_needed(libs):
    user = libs(CALLS_DEP)
    with pytest.raises(elf_drop_needed.Refused, match="does not need libcudart.so.13"):
        elf_drop_needed.drop_needed(str(user), ["libcudart.so.13"])
    result = subprocess.run([sys.executable, str(SCRIPT), str(user), "libcudart.so.13"], capture_output=True, text=True)
    assert result.returncode == 1 and "does not need" in result.stderr
