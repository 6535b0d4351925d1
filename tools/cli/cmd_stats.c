/* cmd_stats */
