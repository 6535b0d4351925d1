/* cmd_debug */
