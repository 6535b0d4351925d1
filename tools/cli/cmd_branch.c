/* cmd_branch */
