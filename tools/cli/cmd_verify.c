/* cmd_verify */
