/* manifest — to be written */
