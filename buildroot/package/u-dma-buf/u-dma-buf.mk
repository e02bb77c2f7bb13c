################################################################################
#
# u-dma-buf
#
################################################################################

# 5.x takes a whole sync command (offset, size, direction) in one write of
# sync_for_cpu / sync_for_device, which fabricd relies on.
U_DMA_BUF_VERSION = v5.5.0
U_DMA_BUF_SITE = https://github.com/ikwzm/udmabuf.git
U_DMA_BUF_SITE_METHOD = git
U_DMA_BUF_LICENSE = BSD-2-Clause or GPL-2.0
U_DMA_BUF_LICENSE_FILES = LICENSE

# The Makefile sets CONFIG_U_DMA_BUF only for its own out-of-tree target;
# kbuild needs it (and the feature switches) on the command line.
U_DMA_BUF_MODULE_MAKE_OPTS = \
	CONFIG_U_DMA_BUF=m \
	U_DMA_BUF_CONFIG=1 \
	U_DMA_BUF_QUIRK_MMAP=1 \
	U_DMA_BUF_IN_KERNEL_FUNCTIONS=1 \
	U_DMA_BUF_IOCTL=2

define U_DMA_BUF_LINUX_CONFIG_FIXUPS
	$(call KCONFIG_ENABLE_OPT,CONFIG_DMA_CMA)
endef

$(eval $(kernel-module))
$(eval $(generic-package))
