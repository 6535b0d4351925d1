/* cmd_import */
