//===- ManifestABI.cpp - The kernel ABI an artifact was built for ---------===//
//
// Reads the manifest's `kernel_abi` (ManifestABI.h) and compares each
// kernel's argument list with this runtime's (KernelABI.h), naming the
// first argument that differs.
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/ManifestABI.h"

#include "cmask_runtime/Json.h"

using namespace cmask::rt;

bool ManifestABI::read(const json::Value &manifest, const std::string &at,
                       std::string &error) {
  where = at;
  auto fail = [&](const std::string &why) {
    error = where + ": kernel_abi: " + why +
            " (rebuild the artifact with this version's cmask-translate)";
    return false;
  };
  const json::Value *abiJSON = manifest.get("kernel_abi");
  if (!abiJSON || !abiJSON->isObject())
    return fail("missing");
  const json::Value *version = abiJSON->get("version");
  if (!version || !version->isInt() || version->integer != abi::kVersion)
    return fail("version " +
                (version && version->isInt() ? std::to_string(version->integer)
                                             : std::string("missing")) +
                "; this runtime reads version " +
                std::to_string(abi::kVersion));
  const json::Value *list = abiJSON->get("kernels");
  if (!list || !list->isObject())
    return fail("missing object \"kernels\"");
  for (const auto &[name, args] : list->object) {
    if (!args.isArray())
      return fail("kernel " + name + ": not an array of [name, kind]");
    std::vector<abi::NamedArg> parsed;
    for (const json::Value &arg : args.array) {
      std::optional<abi::ArgKind> kind;
      if (arg.isArray() && arg.array.size() == 2 && arg.array[0].isString() &&
          arg.array[1].isString())
        kind = abi::parseArgKind(arg.array[1].string);
      if (!kind)
        return fail("kernel " + name + ": argument " +
                    std::to_string(parsed.size()) +
                    " is not [name, kind] with a known kind");
      parsed.push_back({arg.array[0].string, *kind});
    }
    kernels[name] = std::move(parsed);
  }
  return true;
}

std::string
ManifestABI::check(const std::string &kernel,
                   const std::vector<abi::NamedArg> &expected) const {
  auto it = kernels.find(kernel);
  if (it == kernels.end())
    return where + ": kernel_abi lists no kernel " + kernel +
           " (rebuild the artifact with this version's cmask-translate)";
  std::string why = abi::describeMismatch(kernel, it->second, expected);
  if (why.empty())
    return "";
  return where +
         ": the artifact's kernel ABI differs from this runtime's: " + why +
         " (rebuild the artifact with this version's cmask-translate)";
}
