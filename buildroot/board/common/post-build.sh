#!/bin/sh
# fabricd's additions to the root file system, after the board's own
# post-build script wrote extlinux.conf.
#  - the kernel command line gets uio_pdrv_genirq.of_id=generic-uio;
#  - the data partition (stats, SSH host keys, authorized_keys) is mounted
#    at /data, so a root file system update keeps them;
#  - dropbear's keys and root's authorized_keys live there.
set -e

EXTLINUX="${BINARIES_DIR}/extlinux.conf"
if [ -f "${EXTLINUX}" ] && ! grep -q 'uio_pdrv_genirq.of_id' "${EXTLINUX}"; then
	sed -i 's/^\(\s*append .*\)$/\1 uio_pdrv_genirq.of_id=generic-uio/' "${EXTLINUX}"
fi

DATA_DEV="$4"
mkdir -p "${TARGET_DIR}/data"
if [ -n "${DATA_DEV}" ] && ! grep -q ' /data ' "${TARGET_DIR}/etc/fstab"; then
	echo "/dev/${DATA_DEV} /data ext4 defaults,noatime 0 2" >> "${TARGET_DIR}/etc/fstab"
fi

# The SSH keys scripts/build-image was given: copied to the data partition
# on first boot (S05data), so the first login works. Buildroot keeps the
# target directory from one build to the next, so a build without keys
# removes those of an earlier one (else the image would let its holder in).
if [ -f "${BASE_DIR}/authorized_keys" ]; then
	install -D -m 0600 "${BASE_DIR}/authorized_keys" "${TARGET_DIR}/etc/fabricd/authorized_keys"
else
	rm -f "${TARGET_DIR}/etc/fabricd/authorized_keys"
fi

rm -rf "${TARGET_DIR}/etc/dropbear"
ln -sfn /data/dropbear "${TARGET_DIR}/etc/dropbear"
mkdir -p "${TARGET_DIR}/root"
rm -rf "${TARGET_DIR}/root/.ssh"
ln -sfn /data/ssh "${TARGET_DIR}/root/.ssh"
