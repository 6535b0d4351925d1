/* cmd_mount */
