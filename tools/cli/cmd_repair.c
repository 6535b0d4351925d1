/* cmd_repair */
