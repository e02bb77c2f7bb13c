################################################################################
#
# fabricd
#
################################################################################

FABRICD_VERSION = 0.1.0
FABRICD_SITE = $(BR2_EXTERNAL_FABRICD_PATH)/..
FABRICD_SITE_METHOD = local
FABRICD_SUBDIR = firmware/fabricd
FABRICD_LICENSE = MIT or Apache-2.0
# Relative to the package's source, the whole repository (FABRICD_SITE), as
# Buildroot's legal-info reads them.
FABRICD_LICENSE_FILES = LICENSE-MIT LICENSE-APACHE
# The repository is the source; leave out what is not (build output,
# scripts/build-image's default output-<board> directories among it).
FABRICD_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /target --exclude /results --exclude /.ci --exclude '/output-*'

# Buildroot vendors the crates of downloaded cargo packages, never of
# local ones, and builds offline: scripts/vendor-crates puts them in
# vendor/ of the repository, and cargo is pointed at that directory.
FABRICD_VENDOR = $(FABRICD_SRCDIR)/../../vendor
FABRICD_CARGO_OPTS = \
	--no-default-features \
	--config $(FABRICD_SRCDIR)/../board-profile.toml \
	--config 'source.crates-io.replace-with="vendored-sources"' \
	--config 'source.vendored-sources.directory="$(FABRICD_VENDOR)"'
FABRICD_CARGO_BUILD_OPTS = $(FABRICD_CARGO_OPTS)
FABRICD_CARGO_INSTALL_OPTS = $(FABRICD_CARGO_OPTS)

define FABRICD_CHECK_VENDORED
	@test -d $(FABRICD_VENDOR) || { \
		echo "fabricd: no vendored crates in $(FABRICD_VENDOR): run scripts/vendor-crates"; \
		exit 1; }
endef
FABRICD_PRE_BUILD_HOOKS += FABRICD_CHECK_VENDORED

# The catalog, and the static shell if bitstreams/shell/ has one (its full
# bitstream shell.bin and overlay shell.dtbo, loaded at boot by
# S55fabricd-shell).
define FABRICD_INSTALL_CATALOG
	mkdir -p $(TARGET_DIR)/lib/firmware/fabricd
	find $(FABRICD_SRCDIR)/../../bitstreams -maxdepth 1 -type f \
		-exec $(INSTALL) -m 0644 -t $(TARGET_DIR)/lib/firmware/fabricd/ {} +
	if [ -d $(FABRICD_SRCDIR)/../../bitstreams/shell ]; then \
		$(INSTALL) -d $(TARGET_DIR)/lib/firmware/fabricd/shell && \
		$(INSTALL) -m 0644 $(FABRICD_SRCDIR)/../../bitstreams/shell/* \
			$(TARGET_DIR)/lib/firmware/fabricd/shell/; \
	fi
endef
FABRICD_POST_INSTALL_TARGET_HOOKS += FABRICD_INSTALL_CATALOG

define FABRICD_INSTALL_INIT_SYSV
	$(INSTALL) -D -m 0755 $(FABRICD_PKGDIR)/S55fabricd-shell \
		$(TARGET_DIR)/etc/init.d/S55fabricd-shell
	$(INSTALL) -D -m 0755 $(FABRICD_PKGDIR)/S60fabricd \
		$(TARGET_DIR)/etc/init.d/S60fabricd
	$(INSTALL) -D -m 0644 $(FABRICD_PKGDIR)/fabricd.toml \
		$(TARGET_DIR)/etc/fabricd/fabricd.toml
endef

$(eval $(cargo-package))
