/* io — to be written */
