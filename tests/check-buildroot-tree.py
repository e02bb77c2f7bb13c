#!/usr/bin/env python3
"""Structural check of the Buildroot external tree in buildroot/.

CI cannot fetch Buildroot, so this checks what can be checked without it:
the tree's layout and names as Buildroot requires them, that every
package names its license files (and a local package's are here), that
every file a defconfig names exists, that the kernel fragment turns on what fabricd
needs, and that the image has its three partitions. The checks with a real
Buildroot (make <defconfig>, check-dotconfig.py, check-package) are in
docs/board.md, with their results.

Prints one line per problem and exits 1 if there is any.
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "buildroot"))
problems = []


def problem(where, what):
    problems.append(f"{os.path.relpath(where, os.path.dirname(ROOT))}: {what}")


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        problem(path, f"cannot be read ({e.strerror})")
        return ""


# external.desc: a name of letters, digits and underscores.
desc = read(os.path.join(ROOT, "external.desc"))
m = re.search(r"^name:\s*(\S+)\s*$", desc, re.M)
if not m:
    problem(os.path.join(ROOT, "external.desc"), "no 'name:' line")
    name = "FABRICD"
elif not re.fullmatch(r"[A-Za-z0-9_]+", m.group(1)):
    problem(os.path.join(ROOT, "external.desc"), f"name {m.group(1)!r} has characters other than letters, digits and _")
    name = m.group(1)
else:
    name = m.group(1)
if not re.search(r"^desc:\s*\S", desc, re.M):
    problem(os.path.join(ROOT, "external.desc"), "no 'desc:' line")
ext_var = f"BR2_EXTERNAL_{name}_PATH"

# Config.in and external.mk take in every package.
packages = sorted(d for d in os.listdir(os.path.join(ROOT, "package"))
                  if os.path.isdir(os.path.join(ROOT, "package", d)))
if not packages:
    problem(os.path.join(ROOT, "package"), "no packages")
config_in = read(os.path.join(ROOT, "Config.in"))
for pkg in packages:
    line = f'source "${ext_var}/package/{pkg}/Config.in"'
    if line not in config_in:
        problem(os.path.join(ROOT, "Config.in"), f"does not source package/{pkg}/Config.in ({line})")
external_mk = read(os.path.join(ROOT, "external.mk"))
if f"$({ext_var})/package/*/*.mk" not in external_mk:
    problem(os.path.join(ROOT, "external.mk"), "does not include package/*/*.mk")

# Each package: a Config.in symbol and a .mk with its variables; a hash
# file unless it is local.
for pkg in packages:
    upper = pkg.upper().replace("-", "_")
    d = os.path.join(ROOT, "package", pkg)
    cin = read(os.path.join(d, "Config.in"))
    if f"config BR2_PACKAGE_{upper}\n" not in cin:
        problem(os.path.join(d, "Config.in"), f"does not define BR2_PACKAGE_{upper}")
    mk = read(os.path.join(d, f"{pkg}.mk"))
    for var in ("VERSION", "SITE", "LICENSE", "LICENSE_FILES"):
        if not re.search(rf"^{upper}_{var}\s*[:+]?=", mk, re.M):
            problem(os.path.join(d, f"{pkg}.mk"), f"no {upper}_{var} (make legal-info needs it)")
    for script in sorted(f for f in os.listdir(d) if re.fullmatch(r"S\d\d[\w-]+", f)):
        if script not in mk:
            problem(os.path.join(d, script), f"is not installed by {pkg}.mk")
    infra = re.findall(r"^\$\(eval \$\(([a-z-]+)\)\)\s*$", mk, re.M)
    if not infra or not infra[-1].endswith("package"):
        problem(os.path.join(d, f"{pkg}.mk"), "does not end with $(eval $(<infrastructure>-package))")
    method = re.search(rf"^{upper}_SITE_METHOD\s*=\s*(\S+)", mk, re.M)
    # A local package's license files are in this repository: legal-info
    # copies each from the package's source directory (its SITE), so each
    # must be there.
    site = re.search(rf"^{upper}_SITE\s*=\s*\$\({ext_var}\)(\S*)\s*$", mk, re.M)
    lic = re.search(rf"^{upper}_LICENSE_FILES\s*=\s*(.+)$", mk, re.M)
    if method and method.group(1) == "local" and site and lic:
        src = os.path.normpath(ROOT + site.group(1))
        for f in lic.group(1).split():
            if not os.path.isfile(os.path.join(src, f)):
                problem(os.path.join(d, f"{pkg}.mk"), f"license file {f} is not in the package's source ({os.path.relpath(src, os.path.dirname(ROOT)) or '.'})")
    if not method or method.group(1) != "local":
        hashes = read(os.path.join(d, f"{pkg}.hash"))
        if not re.search(r"^sha256\s+[0-9a-f]{64}\s+\S+", hashes, re.M):
            problem(os.path.join(d, f"{pkg}.hash"), "no sha256 line (a downloaded package needs its hash)")
        lic = re.search(rf"^{upper}_LICENSE_FILES\s*=\s*(.+)$", mk, re.M)
        for f in (lic.group(1).split() if lic else []):
            if not re.search(rf"^sha256\s+[0-9a-f]{{64}}\s+{re.escape(f)}\s*$", hashes, re.M):
                problem(os.path.join(d, f"{pkg}.hash"), f"no hash of the license file {f}")

# The daemon's package: a cargo package that builds offline from vendor/.
fabricd_mk = read(os.path.join(ROOT, "package", "fabricd", "fabricd.mk"))
for needle, why in [
    ("$(eval $(cargo-package))", "fabricd must use the cargo-package infrastructure"),
    ("source.crates-io.replace-with", "fabricd must point cargo at the vendored crates"),
    ("--config $(FABRICD_SRCDIR)/../board-profile.toml",
     "fabricd must build with the boards' profile, as scripts/deploy and scripts/arm-cost do"),
    ("S60fabricd", "fabricd must install its init script"),
    ("/lib/firmware/fabricd", "the catalog goes to /lib/firmware/fabricd"),
]:
    if needle not in fabricd_mk:
        problem(os.path.join(ROOT, "package", "fabricd", "fabricd.mk"), why)
fabricd_cin = read(os.path.join(ROOT, "package", "fabricd", "Config.in"))
for needle in ("depends on BR2_PACKAGE_HOST_RUSTC_TARGET_ARCH_SUPPORTS", "select BR2_PACKAGE_HOST_RUSTC"):
    if needle not in fabricd_cin:
        problem(os.path.join(ROOT, "package", "fabricd", "Config.in"), f"lacks '{needle}'")

# The kernel fragment: what the fabric needs.
fragment = read(os.path.join(ROOT, "board", "common", "linux.fragment"))
for opt in ["FPGA", "FPGA_BRIDGE", "FPGA_REGION", "OF_FPGA_REGION", "XILINX_PR_DECOUPLER",
            "OF_OVERLAY", "CONFIGFS_FS", "OF_CONFIGFS", "UIO", "UIO_PDRV_GENIRQ"]:
    if not re.search(rf"^CONFIG_{opt}=[ym]\s*$", fragment, re.M):
        problem(os.path.join(ROOT, "board", "common", "linux.fragment"), f"CONFIG_{opt} is not on")
post_build = read(os.path.join(ROOT, "board", "common", "post-build.sh"))
if "uio_pdrv_genirq.of_id=generic-uio" not in post_build:
    problem(os.path.join(ROOT, "board", "common", "post-build.sh"), "does not put uio_pdrv_genirq.of_id=generic-uio on the command line")

# The defconfigs: every file they name exists; scripts are executable.
configs = sorted(os.listdir(os.path.join(ROOT, "configs")))
if len(configs) < 2:
    problem(os.path.join(ROOT, "configs"), "expected a defconfig for the KV260 and one for a Zynq-7000 board")
for c in configs:
    path = os.path.join(ROOT, "configs", c)
    if not re.fullmatch(rf"{name.lower()}_[a-z0-9_]+_defconfig", c):
        problem(path, f"should be named {name.lower()}_<board>_defconfig")
    text = read(path)
    opts = dict(re.findall(r"^(BR2_\w+)=(.*)$", text, re.M))
    if opts.get("BR2_PACKAGE_FABRICD") != "y":
        problem(path, "does not select BR2_PACKAGE_FABRICD")
    # The shell overlay refers to the base tree's labels (fpga_full, the
    # interrupt controller, the clocks): the board tree needs __symbols__.
    if opts.get("BR2_LINUX_KERNEL_DTB_OVERLAY_SUPPORT") != "y":
        problem(path, "does not set BR2_LINUX_KERNEL_DTB_OVERLAY_SUPPORT (the base tree has no __symbols__ for the shell overlay)")
    for ref in re.findall(rf"\$\({ext_var}\)/([^\s\"]+)", text):
        target = os.path.join(ROOT, ref)
        if not os.path.exists(target):
            problem(path, f"names {ref}, which does not exist")
        elif ref.endswith(".sh") and not os.access(target, os.X_OK):
            problem(target, "is not executable")
    args = opts.get("BR2_ROOTFS_POST_SCRIPT_ARGS", "").strip('"').split()
    if len(args) != 4:
        problem(path, "BR2_ROOTFS_POST_SCRIPT_ARGS must be: console, root device, data device, board directory")
    else:
        board = os.path.join(ROOT, "board", args[3])
        genimage = read(os.path.join(board, "genimage.cfg"))
        parts = re.findall(r"^\s*partition\s+(\w+)\s*\{", genimage, re.M)
        if parts != ["boot", "rootfs", "data"]:
            problem(os.path.join(board, "genimage.cfg"), f"partitions {parts}, expected boot, rootfs, data")
        if args[1][:-1] != args[2][:-1] or not (args[1].endswith("2") and args[2].endswith("3")):
            problem(path, f"root {args[1]} and data {args[2]} should be partitions 2 and 3 of one card")
        if "kv260" in c and not args[1].startswith("mmcblk1"):
            problem(path, "the KV260's SD card is mmcblk1")
    for script in ("BR2_ROOTFS_POST_BUILD_SCRIPT", "BR2_ROOTFS_POST_IMAGE_SCRIPT"):
        if script not in opts:
            problem(path, f"has no {script}")

# (A package's own init script is installed with its mode by the .mk, as in
# Buildroot's packages; the overlay's is copied as it is.)
for script in ["board/common/rootfs-overlay/etc/init.d/S05data",
               "board/common/post-build.sh", "board/common/post-image.sh"]:
    p = os.path.join(ROOT, script)
    if not os.access(p, os.X_OK):
        problem(p, "is not executable")

for p in problems:
    print(p)
print(f"buildroot tree: {len(packages)} packages, {len(configs)} defconfigs, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
