# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "CMASK"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".json", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "Examples"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cmask_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
# Generates hostile inputs too large to commit (e.g. deeply nested JSON).
import sys
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%masks", os.path.join(config.cmask_src_root, "masks")))
config.environment["FILECHECK_OPTS"] = "--enable-var-scope --dump-input=fail"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.cmask_tools_dir, config.llvm_tools_dir]
tools = ["cmask-opt", "cmask-translate"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The runtime's artifact check, where runtime/ is built (the CUDA toolkit is
# installed); tests that need it say `REQUIRES: runtime`. Without a driver
# it runs against the toolkit's stub (it makes no CUDA call).
if os.path.exists(os.path.join(config.cmask_tools_dir, "cmask-artifact-check")):
    config.available_features.add("runtime")
    llvm_config.add_tool_substitutions(["cmask-artifact-check"], tool_dirs)
    if config.cuda_stub_dir:
        llvm_config.with_environment("LD_LIBRARY_PATH", config.cuda_stub_dir,
                                     append_path=True)
else:
    lit_config.note("runtime/ not built (no CUDA toolkit): its checks are skipped")
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# ptxas validates emitted PTX where the CUDA toolkit is installed; tests that
# need it say `REQUIRES: ptxas` and are reported UNSUPPORTED (skipped) without.
import shutil
ptxas = shutil.which("ptxas") or next(
    (p for p in [os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "ptxas"),
                 "/usr/local/cuda/bin/ptxas"] if p and os.path.exists(p)), None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
else:
    lit_config.note("ptxas not found: PTX assembly tests are skipped")

# valgrind checks the tools' memory use on hostile inputs where it is
# installed (`%if valgrind %{ ... %}` RUN lines).
if shutil.which("valgrind"):
    config.available_features.add("valgrind")
