/* cmd_init */
