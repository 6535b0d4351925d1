/* cmd_export */
