/* error_info — to be written */
