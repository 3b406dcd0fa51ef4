"""Work out which wheels the GPU host lacks for vllm==0.25.0 and write them pinned (gpu-kit.txt).

Run here (not on the device), with a Python 3.12 interpreter so markers evaluate as on the device:

    python3.12 tests/harness/device/gpu_kit_resolve.py --image-freeze FREEZE --out tests/harness/device/gpu-kit.txt

FREEZE is `python3 -m pip list --format=freeze` as read on the device (tests/fixtures/h200/image-freeze.txt).
A walk over Requires-Dist, not pip's resolver: the image's own packages are taken as they are (its numpy
2.5.2 is newer than mistral-common's declared bound, its numba 0.68 newer than vLLM's pin; shadowing them
would change what torch runs on), every other name is downloaded (no deps) at the newest version that fits
the first requirement met, and its own Requires-Dist followed. SKIP names the heavy optional kernel
packages a tiny bf16 model on Hopper does not import; EXTRA_PINS what vLLM pins that the walk must honour.
"""
import argparse
import email.parser
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile

from pip._vendor.packaging.markers import default_environment
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
from pip._vendor.packaging.version import InvalidVersion, Version

ROOT = "vllm==0.25.0"
# Heavy, optional for this run (Hopper, bf16, no quantisation, no video): left behind on purpose.
SKIP = {
    "torch", "torchaudio", "torchvision", "triton", "numba", "llvmlite", "setuptools",  # the image's own
    "torchcodec", "pynvvideocodec", "flashinfer-cubin", "tilelang", "nvidia-cudnn-frontend",
    "fastsafetensors", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13",
    "quack-kernels", "tokenspeed-mla", "humming-kernels", "cuda-python",
}
# Kept although their declared needs pull heavy packages: the V2 model runner's sampler imports flashinfer.
EXTRA_PINS = {"flashinfer-python": "0.6.13", "apache-tvm-ffi": "0.1.9"}
PLATFORMS = ["manylinux_2_%d_x86_64" % n for n in (17, 24, 27, 28, 31, 34, 35)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def released_before(name, specifier, as_of):
    """Versions of name that fit specifier with a file uploaded before as_of (YYYY-MM-DD), newest first."""
    with urllib.request.urlopen("https://pypi.org/pypi/%s/json" % name, timeout=30) as resp:
        releases = json.load(resp)["releases"]
    found = []
    for text, files in releases.items():
        files = [f for f in files if not f.get("yanked") and f["filename"].endswith(".whl")]
        if not files or min(f["upload_time"] for f in files) >= as_of:
            continue
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        pinned_prerelease = any(Version(s.version).is_prerelease for s in specifier if s.operator == "==")
        if version.is_prerelease and not pinned_prerelease:
            continue
        if specifier.contains(version, prereleases=True):
            found.append(version)
    return [str(v) for v in sorted(found, reverse=True)]


def download(spec, dest):
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
            "3.12", "--implementation", "cp", "-d", str(dest)]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    before = set(dest.iterdir())
    subprocess.run(argv + [spec], check=True)
    new = set(dest.iterdir()) - before
    if new:
        return new.pop()
    req = Requirement(spec)  # already downloaded: the wheel of that name whose version fits
    for wheel in sorted(dest.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if canonicalize_name(name) == canonicalize_name(req.name) and req.specifier.contains(version, True):
            return wheel
    raise SystemExit("no wheel for %s in %s" % (spec, dest))


def metadata(wheel):
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if re.match(r"[^/]+\.dist-info/METADATA$", n))
        return email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-freeze", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--download-dir", default=None)
    parser.add_argument("--as-of", default=None, help="YYYY-MM-DD: newest release uploaded before this date "
                        "(vLLM's own release date), so the walk meets the APIs vLLM was built against")
    args = parser.parse_args()
    image = {}
    for line in pathlib.Path(args.image_freeze).read_text().splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            image[canonicalize_name(name)] = version
    dest = pathlib.Path(args.download_dir or tempfile.mkdtemp(prefix="gpu-kit-"))
    dest.mkdir(parents=True, exist_ok=True)
    env = default_environment()
    env.update({"python_version": "3.12", "python_full_version": "3.12.3", "platform_machine": "x86_64",
                "sys_platform": "linux", "platform_system": "Linux", "implementation_name": "cpython"})
    queue = [(Requirement(ROOT), "root")]
    chosen, notes = {}, []
    while queue:
        req, parent = queue.pop(0)
        name = canonicalize_name(req.name)
        if name in SKIP:
            continue
        if name in image:
            if req.specifier and not req.specifier.contains(image[name], prereleases=True):
                notes.append("# image %s==%s kept; %s asks %s" % (name, image[name], parent, req.specifier))
            continue
        if name in chosen:
            version = chosen[name][0]
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                notes.append("# %s==%s kept; %s asks %s" % (name, version, parent, req.specifier))
            for extra in req.extras - chosen[name][2]:
                chosen[name][2].add(extra)
                queue.extend(follow(chosen[name][1], {extra}, env, name))
            continue
        if name in EXTRA_PINS:
            candidates = [EXTRA_PINS[name]]
        elif args.as_of:
            candidates = released_before(name, req.specifier, args.as_of)[:4]
        else:
            candidates = [None]
        wheel = None
        for version in candidates:
            spec = "%s==%s" % (name, version) if version else "%s%s" % (name, req.specifier)
            try:
                wheel = download(spec, dest)
                break
            except subprocess.CalledProcessError:  # no wheel for this platform: the next older one
                continue
        if wheel is None:
            raise SystemExit("no wheel for %s%s" % (name, req.specifier))
        meta = metadata(wheel)
        chosen[name] = (meta["Version"], meta, set(req.extras), wheel.name)
        print("%-40s %-12s (from %s)" % (name, meta["Version"], parent), flush=True)
        queue.extend(follow(meta, set(req.extras), env, name))
    lines = ["# vllm==0.25.0 on the device image (Python 3.12.3, torch 2.11.0+cu130): the wheels it lacks.",
             "# Written by tests/harness/device/gpu_kit_resolve.py%s; SKIP there lists what stays behind." % (
                 " --as-of %s" % args.as_of if args.as_of else "")]
    lines += sorted(notes)
    lines += ["%s==%s" % (name, chosen[name][0]) for name in sorted(chosen)]
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")


def follow(meta, extras, env, parent):
    out = []
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None:
            out.append((req, parent))
            continue
        for extra in [""] + sorted(extras):
            if req.marker.evaluate(dict(env, extra=extra)):
                out.append((req, parent))
                break
    return out


if __name__ == "__main__":
    main()
