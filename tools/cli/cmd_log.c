/* cmd_log */
