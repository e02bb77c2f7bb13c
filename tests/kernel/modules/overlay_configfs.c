// SPDX-License-Identifier: GPL-2.0
/*
 * overlay_configfs: device-tree overlays applied from userspace through
 * configfs, for fabricd's real-kernel rig (scripts/kernel-test).
 *
 * Why it exists. Mainline Linux has no userspace interface to device-tree
 * overlays. The kernels fabricd's boards run (linux-xlnx, the Kria images)
 * carry one as a vendor patch, CONFIG_OF_CONFIGFS, and fabricd's init
 * scripts and daemon use it. This module gives a mainline kernel the same
 * ABI over of_overlay_fdt_apply(), so the rig runs the code path the board
 * runs:
 *
 *   mkdir <configfs>/device-tree/overlays/NAME
 *   echo some.dtbo > .../NAME/path   (a name under the firmware search path)
 *   or: cat some.dtbo > .../NAME/dtbo
 *   cat .../NAME/status               "applied" or "unapplied"
 *   rmdir .../NAME                    removes the overlay
 *
 * As in the vendor patch, a write to path that fails to apply still
 * returns success: the failure is in status ("unapplied") and the kernel
 * log. Userspace must read status back; fabricd does. A write to dtbo
 * returns the error. Either attribute can be written once per directory.
 *
 * An overlay that failed part-way is removed again at once (the OF core
 * leaves that to the caller), so nothing half-applied stays in the tree.
 */

#include <linux/configfs.h>
#include <linux/firmware.h>
#include <linux/limits.h>
#include <linux/module.h>
#include <linux/of.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

struct overlay_item {
	struct config_item item;
	char path[PATH_MAX];
	/* The overlay changeset's id while applied, else 0. */
	int ovcs_id;
	/* Set once path or dtbo has been written, whatever came of it. */
	bool written;
	void *dtbo;
	size_t dtbo_size;
};

static struct overlay_item *to_overlay(struct config_item *item)
{
	return container_of(item, struct overlay_item, item);
}

/*
 * Applies the blob. On failure the OF core may have applied part of the
 * changeset and still hands back its id: remove it then.
 */
static int overlay_apply(struct overlay_item *ov, const void *blob, size_t size)
{
	int id = 0;
	int err = of_overlay_fdt_apply(blob, size, &id, NULL);

	if (err) {
		pr_err("overlay_configfs: %s: applying the overlay failed: %d\n",
		       config_item_name(&ov->item), err);
		if (id && of_overlay_remove(&id))
			pr_err("overlay_configfs: %s: removing the partly applied overlay failed\n",
			       config_item_name(&ov->item));
		return err;
	}
	ov->ovcs_id = id;
	return 0;
}

static ssize_t overlay_item_path_show(struct config_item *item, char *page)
{
	return sysfs_emit(page, "%s\n", to_overlay(item)->path);
}

static ssize_t overlay_item_path_store(struct config_item *item,
				       const char *page, size_t count)
{
	struct overlay_item *ov = to_overlay(item);
	const struct firmware *fw;
	int err;

	if (ov->written)
		return -EPERM;
	ov->written = true;
	strscpy(ov->path, page, sizeof(ov->path));
	strim(ov->path);

	err = request_firmware(&fw, ov->path, NULL);
	if (err) {
		pr_err("overlay_configfs: %s: loading %s failed: %d\n",
		       config_item_name(item), ov->path, err);
		return count;
	}
	overlay_apply(ov, fw->data, fw->size);
	release_firmware(fw);
	return count;
}

static ssize_t overlay_item_status_show(struct config_item *item, char *page)
{
	return sysfs_emit(page, "%s\n",
			  to_overlay(item)->ovcs_id ? "applied" : "unapplied");
}

static ssize_t overlay_item_dtbo_read(struct config_item *item, void *buf,
				      size_t max_count)
{
	struct overlay_item *ov = to_overlay(item);

	if (!ov->dtbo)
		return 0;
	if (buf) {
		if (ov->dtbo_size > max_count)
			return -ENOSPC;
		memcpy(buf, ov->dtbo, ov->dtbo_size);
	}
	return ov->dtbo_size;
}

static ssize_t overlay_item_dtbo_write(struct config_item *item,
				       const void *buf, size_t count)
{
	struct overlay_item *ov = to_overlay(item);
	int err;

	if (ov->written)
		return -EPERM;
	ov->written = true;
	ov->dtbo = kmemdup(buf, count, GFP_KERNEL);
	if (!ov->dtbo)
		return -ENOMEM;
	ov->dtbo_size = count;
	err = overlay_apply(ov, ov->dtbo, ov->dtbo_size);
	return err ? err : count;
}

CONFIGFS_ATTR(overlay_item_, path);
CONFIGFS_ATTR_RO(overlay_item_, status);
CONFIGFS_BIN_ATTR(overlay_item_, dtbo, NULL, SZ_1M);

static struct configfs_attribute *overlay_attrs[] = {
	&overlay_item_attr_path,
	&overlay_item_attr_status,
	NULL,
};

static struct configfs_bin_attribute *overlay_bin_attrs[] = {
	&overlay_item_attr_dtbo,
	NULL,
};

static void overlay_release(struct config_item *item)
{
	struct overlay_item *ov = to_overlay(item);

	/*
	 * An overlay that others were applied on top of cannot go first; the
	 * OF core refuses and says so in the log. configfs cannot fail an
	 * rmdir, so the overlay then stays in the tree, as with the vendor
	 * patch: remove overlays in the reverse order of applying them.
	 */
	if (ov->ovcs_id && of_overlay_remove(&ov->ovcs_id))
		pr_err("overlay_configfs: %s: removing the overlay failed\n",
		       config_item_name(item));
	kfree(ov->dtbo);
	kfree(ov);
}

static struct configfs_item_operations overlay_item_ops = {
	.release = overlay_release,
};

static const struct config_item_type overlay_type = {
	.ct_item_ops = &overlay_item_ops,
	.ct_attrs = overlay_attrs,
	.ct_bin_attrs = overlay_bin_attrs,
	.ct_owner = THIS_MODULE,
};

static struct config_item *overlays_make_item(struct config_group *group,
					      const char *name)
{
	struct overlay_item *ov = kzalloc(sizeof(*ov), GFP_KERNEL);

	if (!ov)
		return ERR_PTR(-ENOMEM);
	config_item_init_type_name(&ov->item, name, &overlay_type);
	return &ov->item;
}

static void overlays_drop_item(struct config_group *group,
			       struct config_item *item)
{
	config_item_put(item);
}

static struct configfs_group_operations overlays_ops = {
	.make_item = overlays_make_item,
	.drop_item = overlays_drop_item,
};

static const struct config_item_type overlays_type = {
	.ct_group_ops = &overlays_ops,
	.ct_owner = THIS_MODULE,
};

static const struct config_item_type device_tree_type = {
	.ct_owner = THIS_MODULE,
};

static struct config_group overlays_group;

static struct configfs_subsystem device_tree_subsys = {
	.su_group = {
		.cg_item = {
			.ci_namebuf = "device-tree",
			.ci_type = &device_tree_type,
		},
	},
	.su_mutex = __MUTEX_INITIALIZER(device_tree_subsys.su_mutex),
};

static int __init overlay_configfs_init(void)
{
	config_group_init(&device_tree_subsys.su_group);
	config_group_init_type_name(&overlays_group, "overlays", &overlays_type);
	configfs_add_default_group(&overlays_group, &device_tree_subsys.su_group);
	return configfs_register_subsystem(&device_tree_subsys);
}

static void __exit overlay_configfs_exit(void)
{
	configfs_unregister_subsystem(&device_tree_subsys);
}

module_init(overlay_configfs_init);
module_exit(overlay_configfs_exit);
MODULE_DESCRIPTION("Device-tree overlays through configfs, the ABI of linux-xlnx's OF_CONFIGFS");
MODULE_LICENSE("GPL");
