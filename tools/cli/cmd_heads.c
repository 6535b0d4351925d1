/* cmd_heads */
