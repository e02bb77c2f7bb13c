// SPDX-License-Identifier: GPL-2.0
/*
 * zynq_pcap_qemu: the Zynq-7000's configuration path, which QEMU does not
 * model, for fabricd's real-kernel rig (scripts/kernel-test). Never for a
 * board.
 *
 * Why it exists. QEMU's xilinx-zynq-a9 machine (7.2, as Debian bookworm
 * ships it, and 10.0 in bookworm-backports alike) creates no devcfg block:
 * `info mtree` shows nothing at 0xf8007000 but the XADC at 0xf8007100, so
 * the PCAP's registers read as zero and writes to them go nowhere (QEMU has
 * a model, hw/dma/xlnx-zynq-devcfg.c, but the machine never instantiates
 * it). Mainline's zynq-fpga driver (drivers/fpga/zynq-fpga.c) still probes
 * the base tree's devcfg node and registers the manager the base region
 * names (fpga_full: fpga-mgr = <&devcfg>), but its write_init reads STATUS
 * as 0 and refuses every load ("DMA command queue not right"), and were
 * that passed, its DMA would never complete and PCFG_DONE never come.
 *
 * What it changes, and nothing more. It keeps the manager zynq-fpga
 * registered (its name, its state op, its 128-byte initial header, its
 * place in /sys/class/fpga_manager) and gives it write ops of its own in
 * place of the driver's three, which need the PCAP:
 *  - write_init: what the driver checks before it touches the hardware: a
 *    full load must hold a sync word in the byte-swapped .bin (the
 *    driver's words when it does not);
 *  - write_sg: what the driver's DMA demands (each chunk 64-bit aligned and
 *    a whole number of words, in the driver's words), then the image goes
 *    to the configuration port below, as the PCAP hands it to the
 *    configuration logic;
 *  - write_complete: where the driver polls PCFG_DONE, waiting for the
 *    rig's device side (fabric-sim kernel) to say it took the image (DONE)
 *    and whether it configured (RESULT). No answer within done_timeout_ms:
 *    -ETIMEDOUT, as the driver's own poll gives.
 * Everything above the manager (fpga-region, the overlay notifier, the PR
 * decoupler bridges, firmware loading) is the kernel's own code.
 *
 * The configuration port is a window of the rig's PL address space: QEMU
 * RAM that the kernel does not own (the rig boots it with mem=512M).
 * Layout, little-endian 32-bit words:
 *   0x00 MAGIC   "FCFG" (0x47464346)
 *   0x04 SEQ     the image's number, written last, after everything else
 *   0x08 FLAGS   the load's fpga_image_info flags (bit 0: partial)
 *   0x0c LEN     the image's length in bytes
 *   0x10 DONE    written by the device side: the last SEQ it has taken
 *   0x14 RESULT  written by the device side before DONE: 0 configured,
 *                else why not (fabric-sim's kernel mode lists the codes)
 *   0x1000       the image, exactly as the manager was given it
 */

#include <linux/delay.h>
#include <linux/fpga/fpga-mgr.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/of.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>

static ulong port = 0x44000000;
module_param(port, ulong, 0444);
MODULE_PARM_DESC(port, "physical address of the configuration port");

static ulong port_size = SZ_16M;
module_param(port_size, ulong, 0444);
MODULE_PARM_DESC(port_size, "bytes in the configuration port");

static uint done_timeout_ms = 10000;
module_param(done_timeout_ms, uint, 0644);
MODULE_PARM_DESC(done_timeout_ms, "how long the device side has to take an image");

#define PORT_MAGIC	0x00
#define PORT_SEQ	0x04
#define PORT_FLAGS	0x08
#define PORT_LEN	0x0c
#define PORT_DONE	0x10
#define PORT_RESULT	0x14
#define PORT_DATA	0x1000
#define MAGIC		0x47464346

static struct fpga_manager *mgr;
static struct fpga_manager_ops ops;
static void __iomem *cfg;
/* The load under way; loads are serialised by the manager's lock. */
static u32 seq;
static u32 load_flags;
static size_t load_len;

/* A sync word as the byte-swapped .bin holds it, on a word boundary. */
static bool has_swapped_sync(const u8 *buf, size_t count)
{
	static const u8 sync[4] = { 0x66, 0x55, 0x99, 0xaa };
	size_t at;

	for (at = 0; at + sizeof(sync) <= count; at += sizeof(sync))
		if (!memcmp(buf + at, sync, sizeof(sync)))
			return true;
	return false;
}

static int pcap_write_init(struct fpga_manager *m, struct fpga_image_info *info,
			   const char *buf, size_t count)
{
	load_flags = info->flags;
	load_len = 0;
	if (!(info->flags & FPGA_MGR_PARTIAL_RECONFIG) && !has_swapped_sync(buf, count)) {
		dev_err(&m->dev,
			"Invalid bitstream, could not find a sync word. Bitstream must be a byte swapped .bin file\n");
		return -EINVAL;
	}
	return 0;
}

static int pcap_write_sg(struct fpga_manager *m, struct sg_table *sgt)
{
	struct sg_mapping_iter miter;
	struct scatterlist *sg;
	int i;

	for_each_sg(sgt->sgl, sg, sgt->orig_nents, i) {
		if ((sg->offset % 8) || (sg->length % 4)) {
			dev_err(&m->dev, "Invalid bitstream, chunks must be aligned\n");
			return -EINVAL;
		}
	}
	sg_miter_start(&miter, sgt->sgl, sgt->orig_nents, SG_MITER_FROM_SG);
	while (sg_miter_next(&miter)) {
		if (miter.length > port_size - PORT_DATA - load_len) {
			sg_miter_stop(&miter);
			dev_err(&m->dev, "image larger than the configuration port (%lu bytes)\n",
				port_size - PORT_DATA);
			return -EFBIG;
		}
		memcpy_toio(cfg + PORT_DATA + load_len, miter.addr, miter.length);
		load_len += miter.length;
	}
	sg_miter_stop(&miter);
	return 0;
}

static int pcap_write_complete(struct fpga_manager *m, struct fpga_image_info *info)
{
	unsigned long deadline;
	u32 result;

	seq++;
	writel(MAGIC, cfg + PORT_MAGIC);
	writel(load_flags, cfg + PORT_FLAGS);
	writel(load_len, cfg + PORT_LEN);
	/* The device side reads SEQ first: everything else must be there. */
	wmb();
	writel(seq, cfg + PORT_SEQ);

	deadline = jiffies + msecs_to_jiffies(done_timeout_ms);
	while (readl(cfg + PORT_DONE) != seq) {
		if (time_after(jiffies, deadline)) {
			dev_err(&m->dev,
				"the fabric did not take image %u within %u ms (is fabric-sim --kernel running?)\n",
				seq, done_timeout_ms);
			return -ETIMEDOUT;
		}
		usleep_range(500, 1000);
	}
	rmb();
	result = readl(cfg + PORT_RESULT);
	if (result) {
		dev_err(&m->dev, "the fabric refused image %u (%zu bytes): result %u\n",
			seq, load_len, result);
		return -EIO;
	}
	return 0;
}

static int __init zynq_pcap_qemu_init(void)
{
	struct device_node *np;
	int err;

	np = of_find_compatible_node(NULL, NULL, "xlnx,zynq-devcfg-1.0");
	if (!np)
		return -ENODEV;
	mgr = of_fpga_mgr_get(np);
	if (IS_ERR(mgr)) {
		pr_err("zynq_pcap_qemu: no FPGA manager on %pOF (is zynq-fpga built in?)\n", np);
		of_node_put(np);
		return PTR_ERR(mgr);
	}
	of_node_put(np);
	cfg = ioremap(port, port_size);
	if (!cfg) {
		err = -ENOMEM;
		goto out;
	}
	err = fpga_mgr_lock(mgr);
	if (err)
		goto out;
	ops = *mgr->mops;
	ops.write_init = pcap_write_init;
	ops.write_sg = pcap_write_sg;
	ops.write_complete = pcap_write_complete;
	mgr->mops = &ops;
	fpga_mgr_unlock(mgr);
	/* Nothing taken yet: the device side starts from here. */
	seq = readl(cfg + PORT_SEQ);
	dev_info(&mgr->dev, "loads go to the configuration port at %#lx\n", port);
	return 0;
out:
	if (cfg)
		iounmap(cfg);
	fpga_mgr_put(mgr);
	return err;
}

/*
 * No module_exit: once the manager's ops point here, the module stays for
 * as long as the manager does.
 */
module_init(zynq_pcap_qemu_init);
MODULE_DESCRIPTION("The Zynq-7000 configuration path that QEMU does not model, for a test rig");
MODULE_LICENSE("GPL");
