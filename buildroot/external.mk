include $(sort $(wildcard $(BR2_EXTERNAL_FABRICD_PATH)/package/*/*.mk))
