/* table — to be written */
