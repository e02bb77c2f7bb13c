#!/bin/sh
# Links system.dtb to the board's device tree (as Buildroot's Zynq boards
# do) and writes sdcard.img with boot, root and data partitions from the
# board's genimage.cfg (the first post-script argument after the console
# and root device: the board directory).
set -e

FIRST_DT=$(sed -nr \
	-e 's|^BR2_LINUX_KERNEL_INTREE_DTS_NAME="(xilinx/)?([-_/[:alnum:]\\.]*).*"$|\2|p' \
	"${BR2_CONFIG}")
[ -z "${FIRST_DT}" ] || ln -fs "${FIRST_DT}.dtb" "${BINARIES_DIR}/system.dtb"

BOARD_DIR="$(dirname "$0")/../$5"
support/scripts/genimage.sh -c "${BOARD_DIR}/genimage.cfg"
